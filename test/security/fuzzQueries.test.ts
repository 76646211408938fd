import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import slugid from 'slugid';
import { apiEndpoints } from '../../src/processes/api.js';
import { createTaskGraph } from '../../src/scheduler/createTaskGraph.js';
import { startTestApi, hawkHeader, type TestApi } from '../../support/api.js';
import { fastTask, graphOf } from '../../support/graphs.js';
import { databaseCounts } from '../helpers/dbState.js';
import { assertAnswered, assertNoPrototypePollution, fuzzParameters, hostileText } from '../helpers/fuzz.js';

/*
 * Every read endpoint (GET, from the list the API serves) with generated route parameters and query strings:
 * raw escapes (`%`, `%zz`, `%00`, overlong UTF-8, lone surrogates), unicode, dot segments, duplicate and
 * unknown parameters, continuation tokens and limits of every shape; anonymous and with credentials. Never a
 * 5xx, a refusal is Taskcluster's shape, and a read writes nothing.
 */

let t: TestApi;
const real = { taskId: '', runId: '0', name: 'private/fuzz/log.txt', clientId: 'fuzz/reader', taskGraphId: '', taskIdOrLabel: 'build', indexPath: 'fuzz.idx.a', namespace: 'fuzz.idx' };
before(async () => {
  // no Temporal here (nor a server at this address): __heartbeat__ answers 503 naming it, at once
  t = await startTestApi({ claimWorkWaitMs: 200, temporalAddress: '127.0.0.1:1' });
  real.taskId = slugid.nice();
  const ok = (res: { status: number; body: unknown }) => assert.ok(res.status < 400, JSON.stringify(res.body));
  ok(await t.request('PUT', `/api/queue/v1/task/${real.taskId}`, { ...fastTask('fuzz'), workerType: 'fuzz-reads' }));
  ok(await t.request('POST', '/api/queue/v1/claim-work/tgs-test/fuzz-reads', { workerGroup: 'g', workerId: 'w', tasks: 1 }));
  const expires = new Date(Date.now() + 24 * 3600_000).toISOString();
  ok(await t.request('POST', `/api/queue/v1/task/${real.taskId}/runs/0/artifacts/${real.name}`, { storageType: 'reference', url: 'https://example.com/x', expires }));
  ok(await t.request('PUT', `/api/auth/v1/clients/${encodeURIComponent(real.clientId)}`, { description: 'reader', expires, scopes: [] }));
  // a stored graph (its workflow is not started: this file runs no Temporal), so graph reads reach their queries
  real.taskGraphId = slugid.nice();
  await createTaskGraph(t.api.deps, real.taskGraphId, graphOf({ build: {}, test: { requires: ['build'] } }));
  // an index entry pointing at the task, so the index's reads reach their queries and the artifact redirect
  ok(await t.request('PUT', `/api/index/v1/task/${real.indexPath}`, { taskId: real.taskId, rank: 0, data: {}, expires }));
  // the setup's task queue and worker, written now: reads flush what the recorder noted (src/queue/workers.ts)
  await t.api.deps.workers.flush();
});
after(async () => {
  await t?.close();
});

/** Percent-encodes any string, lone surrogates included (as the bytes a careless client would send). */
function encode(text: string): string {
  try {
    return encodeURIComponent(text);
  } catch {
    return [...text].map((ch) => {
      const code = ch.charCodeAt(0);
      if (ch.length === 1 && code >= 0xd800 && code <= 0xdfff) return `%${(0xe0 | (code >> 12)).toString(16)}%${(0x80 | ((code >> 6) & 0x3f)).toString(16)}%${(0x80 | (code & 0x3f)).toString(16)}`;
      return encodeURIComponent(ch);
    }).join('');
  }
}

const rawJunk = fc.oneof(
  fc.constantFrom('%', '%zz', '%0', '%00', 'a%00b', '%00%00', '%ff', '%ED%A0%80', '%C0%AF', '%2e%2e', '..', '.', '%2F', '%252F', '%u0041', '+', '%20', '%5C', ';', ',', '*', '~', "'"),
  fc.stringMatching(/^[A-Za-z0-9%._~!$'()*,;:@+-]{0,30}$/),
);

/** A route parameter: a real value, a valid-looking one, or hostile text (raw or encoded). */
function segment(param: string): fc.Arbitrary<string> {
  const realValue = param in real ? fc.constant(encode((real as Record<string, string>)[param]).replace(/%2F/g, '/')) : fc.constant(slugid.nice());
  return fc.oneof(
    { arbitrary: realValue, weight: 2 },
    { arbitrary: fc.constantFrom(slugid.nice(), '0', '49', '99', 'a', 'public/x', real.taskId.toLowerCase()), weight: 2 },
    { arbitrary: hostileText.map(encode), weight: 3 },
    { arbitrary: rawJunk, weight: 3 },
    { arbitrary: fc.array(rawJunk, { minLength: 2, maxLength: 4 }).map((parts) => parts.join('/')), weight: 1 },
  );
}

const queryName = (declared: string[]) =>
  fc.oneof(
    { arbitrary: fc.constantFrom(...declared, 'continuationToken', 'limit'), weight: 5 },
    { arbitrary: fc.constantFrom('__proto__', 'constructor', 'bewit', 'toString', 'limit[]', 'a[b]', ''), weight: 1 },
    { arbitrary: rawJunk, weight: 1 },
  );
const queryValue = fc.oneof(
  fc.constantFrom('1', '0', '-1', '1000', '1001', '99999', '1e3', '0x10', ' 1', '1.5', 'NaN', '', 'running', 'AAAA', '____', '-', 'MTIz', '0:0:', '1:2:3', '99999999999999999999:1:', '5:3:4'),
  fc.stringMatching(/^[A-Za-z0-9_-]{1,200}$/),
  // tokens shaped like tgs's own (base64url text), with keys at and past their limits
  fc.constantFrom('9999999999999999999.x', '-9999999999999999999.x', '0.', '1.a', 'a\u0000', '\u00ff', '0').map((key) => Buffer.from(key).toString('base64url')),
  fc.stringMatching(/^[0-9]{1,20}:[0-9]{1,20}:[0-9,]{0,30}$/),
  hostileText.map(encode),
  rawJunk,
);

const getEndpoints = apiEndpoints.filter((e) => e.method === 'get');
const routeParams = (route: string) => [...route.matchAll(/<([a-zA-Z]+)\*?>/g)].map((m) => m[1]);

const request = fc
  .constantFrom(...getEndpoints.flatMap((e) => [e.route, ...(e.aliases ?? [])].map((route) => ({ e, route }))))
  .chain(({ e, route }) =>
    fc.record({
      service: fc.constant(e.service),
      route: fc.constant(route),
      params: fc.tuple(...routeParams(route).map(segment)),
      query: fc.array(
        fc.oneof(
          fc.tuple(queryName(Object.keys(e.query ?? {})), queryValue).map(([n, v]) => `${n}=${v}`),
          queryName(Object.keys(e.query ?? {})),
          fc.constantFrom('', '=', '==', '&'),
        ),
        { maxLength: 4 },
      ),
      signed: fc.boolean(),
    }),
  );

test('read endpoints: generated route parameters and query strings never crash, refusals are Taskcluster errors, reads write nothing', async (ctx) => {
  const statuses = new Map<number, number>();
  // the changes endpoint long-polls when its cursor is current: a request waits at most this long
  const timeout = 5_000;
  await fc.assert(
    fc.asyncProperty(request, async (r) => {
      let path = r.route;
      routeParams(r.route).forEach((p, i) => (path = path.replace(new RegExp(`<${p}\\*?>`), r.params[i])));
      const url = new URL(`${t.rootUrl}/api/${r.service}/v1${path}${r.query.length > 0 ? `?${r.query.join('&')}` : ''}`).href;
      const before = await databaseCounts(t.db.pool);
      let res: Response;
      try {
        res = await fetch(url, {
          headers: r.signed ? { authorization: hawkHeader(url, 'GET', t.root) } : {},
          redirect: 'manual',
          signal: AbortSignal.timeout(timeout),
        });
      } catch (err) {
        // a current cursor makes the changes endpoint wait for news: that is its answer, not a hang
        if ((err as Error).name === 'TimeoutError' && r.route.endsWith('/changes')) return;
        throw err;
      }
      const text = await res.text();
      let body: unknown = text;
      try {
        body = JSON.parse(text);
      } catch {
        // left as text: assertAnswered reports it if it was a refusal
      }
      const what = `GET ${url}${r.signed ? ' (signed)' : ''}`;
      if (r.route === '/__heartbeat__' && res.status === 503) {
        // A heartbeat reports the dependencies that are down: the only 5xx that is an answer. Temporal always is
        // here; RabbitMQ or Postgres may be too while another test restarts them, and then must be named.
        const error = body as { code?: unknown; message?: unknown; details?: { services?: Record<string, { ok: boolean; error?: string }> } };
        assert.equal(error.code, 'ServiceUnavailable', what);
        assert.equal(typeof error.message, 'string', what);
        const down = Object.entries(error.details?.services ?? {}).filter(([, v]) => !v.ok);
        assert.ok(down.some(([name]) => name === 'temporal'), `${what}: names Temporal`);
        for (const [name, v] of down) {
          assert.equal(typeof v.error, 'string', `${what}: says why ${name} is down`);
          assert.ok((error.message as string).includes(name), `${what}: the message names ${name}`);
        }
      } else {
        assertAnswered({ status: res.status, body }, what);
      }
      assertNoPrototypePollution(what);
      assert.deepEqual(await databaseCounts(t.db.pool), before, `${what}: a read wrote something`);
      statuses.set(res.status, (statuses.get(res.status) ?? 0) + 1);
    }),
    fuzzParameters(2300),
  );
  ctx.diagnostic(`statuses: ${JSON.stringify(Object.fromEntries(statuses))}`);
  assert.ok((statuses.get(200) ?? 0) + (statuses.get(303) ?? 0) > 100, 'some reads succeed, or the generators only test refusals');
});

// service and route only: a counterexample prints them, not the handler's source
const paged = getEndpoints.filter((e) => e.query && Object.hasOwn(e.query, 'continuationToken')).map((e) => ({ service: e.service, route: e.route }));

test('paged reads: continuation tokens shaped like tgs\'s own (base64url of any text) are answered or refused, never a 500', async () => {
  const key = fc.oneof(
    hostileText,
    fc.tuple(fc.bigInt({ min: -(10n ** 20n), max: 10n ** 20n }), fc.oneof(fc.constant(slugid.nice()), hostileText)).map(([n, id]) => `${n}.${id}`),
    fc.tuple(fc.nat(), fc.nat()).map(([a, b]) => `${a}:${b}`),
  );
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...paged), key, fc.boolean(), async (e, k, signed) => {
      const path = e.route.replace('<taskId>', real.taskId).replace('<runId>', '0').replace('<taskGroupId>', real.taskId).replace('<taskGraphId>', real.taskGraphId).replace('<namespace>', real.namespace);
      const url = `${t.rootUrl}/api/${e.service}/v1${path}?limit=1&continuationToken=${Buffer.from(k).toString('base64url') || 'A'}`;
      const res = await fetch(url, { headers: signed ? { authorization: hawkHeader(url, 'GET', t.root) } : {} });
      assertAnswered({ status: res.status, body: await res.json() }, `GET ${url}`);
    }),
    fuzzParameters(300),
  );
});
