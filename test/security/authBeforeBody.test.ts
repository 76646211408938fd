import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import http from 'node:http';
import { randomBytes } from 'node:crypto';
import hawk from 'hawk';
import slugid from 'slugid';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';
import { hawkHeader } from '../../support/api.js';
import { loadConfig, ROOT_CLIENT_ID } from '../../src/config.js';
import { createTaskGraph } from '../../src/scheduler/createTaskGraph.js';
import { memoryOf, streamRequest } from './helpers.js';

// The API runs as a child process (the real `tgs api`), so its resident set is measured on its own: in this
// process the test runner, the database pools and the test's own buffers would move the figure as much as
// what is measured.
const MB = 1024 * 1024;
const HUGE = 200 * MB;
let db: TestDatabase;
let api: ChildProcess;
let rootUrl: string;
const rootToken = randomBytes(20).toString('hex');
const limited = { clientId: 'sec/limited', accessToken: randomBytes(20).toString('hex') };

before(async () => {
  db = await createTestDatabase();
  await db.pool.query(
    `INSERT INTO clients (client_id, access_token, scopes, expires) VALUES ($1, $2, $3, now() + interval '1 hour')`,
    [limited.clientId, limited.accessToken, ['queue:scheduler-id:*']],
  );
  api = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', 'api'], {
    env: { ...process.env, DATABASE_URL: db.url, PORT: '0', TGS_ROOT_ACCESS_TOKEN: rootToken },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  api.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  rootUrl = await new Promise<string>((resolve, reject) => {
    api.stdout?.on('data', (d: Buffer) => {
      out += d.toString();
      const m = /listening on (http:\/\/\S+)/.exec(out);
      if (m) resolve(m[1].replace('[::1]', '127.0.0.1'));
    });
    api.once('exit', (code) => reject(new Error(`tgs api exited with ${code}:\n${out}`)));
  });
});

after(async () => {
  api.kill('SIGTERM');
  await new Promise((r) => (api.exitCode !== null ? r(undefined) : api.once('exit', r)));
  await db.drop();
});

const graphUrl = () => `${rootUrl}/api/scheduler/v1/task-graph/${slugid.nice()}`;

test('an anonymous 200 MB createTaskGraph is refused with 403 before its body is read; the API memory stays flat', async () => {
  // Warm up the route (lazy initialization) before taking the baseline.
  const warm = await streamRequest(graphUrl(), { method: 'PUT', headers: { 'content-type': 'application/json' }, totalBytes: 1024 });
  assert.equal(warm.status, 403);
  const before = await memoryOf(api.pid as number);
  const res = await streamRequest(graphUrl(), { method: 'PUT', headers: { 'content-type': 'application/json' }, totalBytes: HUGE });
  const afterwards = await memoryOf(api.pid as number);
  assert.equal(res.status, 403, JSON.stringify(res.body));
  assert.equal(res.body.code, 'InsufficientScopes');
  assert.match(res.body.message, /scheduler:create-task-graph/);
  assert.deepEqual(res.body.requestInfo.payload, {});
  assert.ok(res.sentWhenAnswered < HUGE / 2, `answered after ${res.sentWhenAnswered / MB} MB of ${HUGE / MB} MB were sent`);
  assert.ok(afterwards.peak - before.peak < 100 * MB, `peak RSS grew by ${(afterwards.peak - before.peak) / MB} MB`);
  assert.ok(afterwards.rss - before.rss < 100 * MB, `RSS grew by ${(afterwards.rss - before.rss) / MB} MB`);
});

test('bad credentials on a 200 MB body of any content type: 401 before the body is read', async () => {
  const url = graphUrl();
  const forged = [
    hawkHeader(url, 'PUT', { clientId: ROOT_CLIENT_ID, accessToken: 'not-the-token' }),
    hawkHeader(url, 'PUT', { clientId: 'nobody/at-all', accessToken: 'x' }),
    'Hawk id="x", ts="1", nonce="n", mac="%%%"',
  ];
  for (const authorization of forged) {
    const res = await streamRequest(url, { method: 'PUT', headers: { 'content-type': 'application/octet-stream', authorization }, totalBytes: HUGE });
    assert.equal(res.status, 401, JSON.stringify(res.body));
    assert.equal(res.body.code, 'AuthenticationFailed');
    assert.ok(res.sentWhenAnswered < HUGE / 2, `answered after ${res.sentWhenAnswered / MB} MB`);
  }
});

test('a client without scheduler:create-task-graph gets 403 before its graph is read', async () => {
  const url = graphUrl();
  const res = await streamRequest(url, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: hawkHeader(url, 'PUT', limited) },
    totalBytes: HUGE,
  });
  assert.equal(res.status, 403, JSON.stringify(res.body));
  assert.equal(res.body.code, 'InsufficientScopes');
  assert.match(res.body.message, /scheduler:create-task-graph/);
  assert.ok(res.sentWhenAnswered < HUGE / 2, `answered after ${res.sentWhenAnswered / MB} MB`);
});

test('an invalid graph from a client without scheduler:create-task-graph is a 403, not a 400', async () => {
  const url = graphUrl();
  const body = JSON.stringify({ tasks: 'not a graph' });
  const res = await fetch(url, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: hawkHeader(url, 'PUT', limited) }, body });
  assert.equal(res.status, 403);
  // The function the Temporal-native path uses asks for the scope before it validates, hashes or prepares.
  const asked: unknown[] = [];
  const deps = { config: loadConfig({}, { databaseUrl: db.url }), pool: db.pool };
  await assert.rejects(
    createTaskGraph(deps, slugid.nice(), { tasks: 'not a graph' }, {
      authorize: (expr) => {
        asked.push(expr);
        throw new Error('refused');
      },
    }),
    /refused/,
  );
  assert.deepEqual(asked, ['scheduler:create-task-graph']);
});

test('the payload hash is verified once the body is read', async () => {
  const url = graphUrl();
  const body = JSON.stringify({ tasks: 'not a graph' });
  const signed = (payload: string) =>
    hawk.client.header(url, 'PUT', {
      credentials: { id: ROOT_CLIENT_ID, key: rootToken, algorithm: 'sha256' },
      payload,
      contentType: 'application/json',
    }).header;
  const good = await fetch(url, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: signed(body) }, body });
  assert.equal(good.status, 400, 'authenticated, then the graph is invalid');
  const tampered = await fetch(url, { method: 'PUT', headers: { 'content-type': 'application/json', authorization: signed('{"tasks":{}}') }, body });
  assert.equal(tampered.status, 401);
  assert.match(((await tampered.json()) as { message: string }).message, /payload hash/);
});

test('endpoints without declared scopes stay open to anonymous callers', async () => {
  assert.equal((await fetch(`${rootUrl}/api/queue/v1/ping`)).status, 200);
  const status = await fetch(`${rootUrl}/api/queue/v1/task/${slugid.nice()}/status`);
  assert.equal(status.status, 404);
});

/**
 * Sends a request's headers, announcing `length` bytes of body, and none of its body: the answer, or
 * 'waiting' when none came within `waitMs` (the server is reading the body).
 */
function answerWithoutBody(url: string, method: string, headers: Record<string, string>, waitMs: number): Promise<{ status: number; body: any } | 'waiting'> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method, headers: { 'content-type': 'application/json', 'content-length': '1000', ...headers } });
    const timer = setTimeout(() => {
      req.destroy();
      resolve('waiting');
    }, waitMs);
    req.on('response', (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString()));
      res.on('end', () => {
        clearTimeout(timer);
        req.destroy();
        resolve({ status: res.statusCode ?? 0, body: JSON.parse(text) });
      });
    });
    req.on('error', (err) => {
      clearTimeout(timer);
      reject(err);
    });
    req.flushHeaders();
  });
}

test('anonymous callers hold the anonymous role, and are still refused before the body of an endpoint it cannot grant', async () => {
  const taskUrl = `${rootUrl}/api/queue/v1/task/${slugid.nice()}`;
  // the control: the probe tells a server that waits for the body (root may create a task: it reads it)
  assert.equal(await answerWithoutBody(taskUrl, 'PUT', { authorization: hawkHeader(taskUrl, 'PUT', { clientId: ROOT_CLIENT_ID, accessToken: rootToken }) }, 1000), 'waiting');
  // createTask's scopes name the body's priority and queue; claimWork's its worker; the role grants neither
  for (const [method, url] of [
    ['PUT', taskUrl],
    ['POST', `${rootUrl}/api/queue/v1/claim-work/prov/type`],
    ['POST', `${rootUrl}/api/auth/v1/scopes/expand`],
  ]) {
    const res = await answerWithoutBody(url, method, {}, 10_000);
    assert.notEqual(res, 'waiting', `${method} ${url}: not answered until its body arrives`);
    if (res === 'waiting') return;
    assert.equal(res.status, 403, `${method} ${url}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.code, 'InsufficientScopes');
  }
});
