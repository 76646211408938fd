import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { mkdtempSync, mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import hawk from 'hawk';
import Fastify from 'fastify';
import { hawkHeader } from '../../src/ui/hawk.js';
import { csrFromCounts, edgeSegments, layoutGraph } from '../../src/ui/graph/layout.js';
import { registerUi, uiSettings } from '../../src/api/ui.js';
import { loadConfig } from '../../src/config.js';
import { isResolved, MISSING, STATE_NAMES, stateCode } from '../../src/ui/states.js';
import { isResolved as isResolvedState, MISSING_TASK_CHAR, TASK_STATE_CHAR, TASK_STATES } from '../../src/taskStates.js';

test('the browser Hawk header is byte for byte what the hawk package computes', async () => {
  const credentials = { clientId: 'static/tgs/root', accessToken: 'secret-token' };
  const cases = [
    { url: 'http://127.0.0.1:8080/api/scheduler/v1/task-graph/abc/cancel', method: 'POST' },
    { url: 'https://tgs.example.com/api/queue/v1/task/abc/runs/0/artifacts/public%2Flog?x=1', method: 'get' },
  ];
  for (const { url, method } of cases) {
    const ours = await hawkHeader(url, method, credentials, { ts: 1700000000, nonce: 'abc123' });
    const theirs = hawk.client.header(url, method, { credentials: { id: credentials.clientId, key: credentials.accessToken, algorithm: 'sha256' }, timestamp: 1700000000, nonce: 'abc123' }).header;
    assert.equal(ours, theirs);
  }
  // with a payload hash and a temporary credential's certificate in ext
  const certificate = JSON.stringify({ version: 1, scopes: ['a'], start: 1, expiry: 2, seed: 's', signature: 'x' });
  const payload = JSON.stringify({ resetDependents: true, label: 'ü' });
  const url = 'http://localhost:3000/api/scheduler/v1/task-graph/abc/rerun/def';
  const ours = await hawkHeader(url, 'POST', { ...credentials, certificate }, { ts: 1700000001, nonce: 'n0nce', payload, contentType: 'application/json; charset=utf-8' });
  const theirs = hawk.client.header(url, 'POST', {
    credentials: { id: credentials.clientId, key: credentials.accessToken, algorithm: 'sha256' },
    timestamp: 1700000001,
    nonce: 'n0nce',
    payload,
    contentType: 'application/json; charset=utf-8',
    ext: Buffer.from(JSON.stringify({ certificate: JSON.parse(certificate) })).toString('base64'),
  }).header;
  assert.equal(ours, theirs);
  // and the server side of hawk accepts it
  const parsed = hawk.utils.parseAuthorizationHeader(ours) as Record<string, string>;
  assert.equal(parsed.id, credentials.clientId);
  assert.ok(parsed.hash && parsed.ext && parsed.mac);
});

/** A layered graph like the bench's: `layers` × `width`, each node requiring `fanIn` of the layer above. */
function layered(layers: number, width: number, fanIn: number) {
  const counts: number[] = [];
  const flat: number[] = [];
  for (let l = 0; l < layers; l++) {
    for (let w = 0; w < width; w++) {
      const req = l === 0 ? [] : [...new Set(Array.from({ length: fanIn }, (_, k) => (l - 1) * width + ((w + k * 7) % width)))];
      counts.push(req.length);
      flat.push(...req);
    }
  }
  return csrFromCounts(counts, flat);
}

test('the layout puts every requirement above its dependent and no two nodes on one spot', () => {
  for (const [layers, width] of [[5, 3], [20, 400], [3, 5000]]) {
    const { reqStart, req } = layered(layers, width, 3);
    const n = layers * width;
    const layout = layoutGraph({ n, reqStart, req });
    assert.equal(layout.layers, layers);
    for (let v = 0; v < n; v++) {
      for (let e = reqStart[v]; e < reqStart[v + 1]; e++) {
        assert.ok(layout.xy[2 * req[e] + 1] < layout.xy[2 * v + 1], `edge ${req[e]} → ${v} points down`);
      }
    }
    const spots = new Set<string>();
    for (let v = 0; v < n; v++) spots.add(`${layout.xy[2 * v]},${layout.xy[2 * v + 1]}`);
    assert.equal(spots.size, n);
    // wide layers wrap into rows: the drawing is not a thin strip
    const b = layout.bounds;
    assert.ok((b.maxX - b.minX) / Math.max(1, b.maxY - b.minY) < 8, `aspect ${JSON.stringify(b)}`);
    // dependents are the transpose of requires
    assert.equal(layout.dep.length, req.length);
    assert.equal(edgeSegments(n, reqStart, req, layout.xy).length, req.length * 4);
  }
});

test('a source is pulled down next to its dependent, and a cycle does not hang the layout', () => {
  // 0 → 1 → 2 → 3, and 4 (no requires) → 3
  const { reqStart, req } = csrFromCounts([0, 1, 1, 2, 0], [0, 1, 2, 4]);
  const layout = layoutGraph({ n: 5, reqStart, req });
  assert.deepEqual(Array.from(layout.layer), [0, 1, 2, 3, 2]);
  const cyclic = csrFromCounts([1, 1, 0], [1, 0]);
  const c = layoutGraph({ n: 3, reqStart: cyclic.reqStart, req: cyclic.req });
  assert.equal(c.xy.length, 6);
});

test('the UI server: files, index.html for client routes with <base> and settings, 503 with what to run when not built', async () => {
  const base = mkdtempSync(path.join(tmpdir(), 'tgs-ui-'));
  const dir = path.join(base, 'ui');
  mkdirSync(path.join(dir, 'assets'), { recursive: true });
  writeFileSync(path.join(base, 'secret.json'), '{"devDependencies": "not for the web"}');
  writeFileSync(path.join(dir, 'index.html'), '<!doctype html><html><head><title>t</title></head><body></body></html>');
  writeFileSync(path.join(dir, 'assets', 'main-abc.js'), 'console.log(1)');
  const config = loadConfig({}, { rootUrl: 'https://tgs.example.com/prefix', temporalAddress: 'temporal.example.com:7233' });
  const app = Fastify();
  registerUi(app, config, dir);
  const missing = Fastify();
  registerUi(missing, config, path.join(dir, 'nope'));
  try {
    for (const url of ['/ui/', '/ui/task-graph/abc', '/ui/task/xyz?a=1']) {
      const res = await app.inject({ url });
      assert.equal(res.statusCode, 200, url);
      assert.match(res.headers['content-type'] as string, /text\/html/);
      assert.match(res.body, /<base href="\/prefix\/ui\/">/);
      const settings = JSON.parse(/<script type="application\/json" id="tgs-settings">(.*?)<\/script>/.exec(res.body)?.[1] ?? '');
      assert.deepEqual(settings, { temporalUiUrl: 'http://temporal.example.com:8233', temporalNamespace: 'default' });
    }
    const js = await app.inject({ url: '/ui/assets/main-abc.js' });
    assert.equal(js.statusCode, 200);
    assert.match(js.headers['content-type'] as string, /javascript/);
    assert.match(js.headers['cache-control'] as string, /immutable/);
    assert.equal((await app.inject({ url: '/ui/assets/gone-123.js' })).statusCode, 404);
    // a path that leaves the UI directory never serves the file
    for (const url of ['/ui/%2e%2e/secret.json', '/ui/..%2fsecret.json', '/ui/assets/..%2f..%2fsecret.json']) {
      assert.doesNotMatch((await app.inject({ url })).body, /"devDependencies"/, url);
    }
    const root = await app.inject({ url: '/' });
    assert.equal(root.statusCode, 302);
    assert.equal(root.headers.location, '/prefix/ui/');
    const notBuilt = await missing.inject({ url: '/ui/task-graph/abc' });
    assert.equal(notBuilt.statusCode, 503);
    assert.match(notBuilt.body, /npm run build/);
  } finally {
    await app.close();
    await missing.close();
  }
  assert.equal(uiSettings(loadConfig({ TGS_TEMPORAL_UI_URL: 'https://temporal.example.com/ui/' })).temporalUiUrl, 'https://temporal.example.com/ui');
});

test('the browser code typechecks (its own tsconfig: DOM and preact JSX; the root tsconfig leaves src/ui out)', () => {
  const tsc = new URL('../../node_modules/typescript/bin/tsc', import.meta.url).pathname;
  const r = spawnSync(process.execPath, [tsc, '-p', new URL('../../src/ui/tsconfig.json', import.meta.url).pathname, '--noEmit'], { encoding: 'utf8' });
  assert.equal(r.status, 0, `tsc -p src/ui/tsconfig.json:\n${r.stdout}${r.stderr}`);
});

test('the explorer decodes every state character of the compact answers to the queue state of that name', () => {
  for (const state of TASK_STATES) {
    const code = stateCode(TASK_STATE_CHAR[state]);
    assert.equal(STATE_NAMES[code], state);
    assert.equal(isResolved(code), isResolvedState(state), state);
  }
  assert.equal(stateCode(MISSING_TASK_CHAR), MISSING);
  assert.equal(STATE_NAMES[MISSING], 'missing');
  assert.equal(isResolved(MISSING), false);
});
