import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { randomBytes } from 'node:crypto';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { recordedCounts } from '../helpers/dbState.js';
import { assertRefusal, nested } from '../helpers/fuzz.js';

/*
 * Plain cases for what the fuzzers and the authorization matrix found: each was a 500, a non-Taskcluster
 * error body, or a refusal that told a caller without scopes about a resource.
 */

let t: TestApi;
before(async () => {
  t = await startTestApi();
});
after(async () => {
  await t?.close();
});

const q = (method: string, path: string, body?: unknown, credentials?: null) => t.request(method, `/api/queue/v1${path}`, body, credentials);

async function refusedAndNothingWritten(body: unknown, what: string, message: RegExp) {
  const before = await recordedCounts(t);
  const res = await q('PUT', `/task/${slugid.nice()}`, body);
  assertRefusal(res, what);
  assert.equal(res.status, 400, what);
  assert.match(res.body.message, message, what);
  assert.deepEqual(await recordedCounts(t), before, `${what}: nothing written`);
}

test('a body nested deeper than 128 levels is a 400, not a stack overflow', async () => {
  await refusedAndNothingWritten({ ...fastTask('deep'), payload: { deep: nested(2_000, 'object') } }, 'nested objects', /nested more than 128 levels/);
  await refusedAndNothingWritten({ ...fastTask('deep'), extra: { deep: nested(3_000, 'array') } }, 'nested arrays', /nested more than 128 levels/);
  const res = await q('PUT', `/task/${slugid.nice()}`, { ...fastTask('deep enough'), payload: { deep: nested(100, 'object') } });
  assert.equal(res.status, 200, 'a hundred levels are fine');
});

test('strings Postgres cannot store (NUL, lone surrogates), in values or keys, are a 400', async () => {
  const task = fastTask('unstorable');
  await refusedAndNothingWritten({ ...task, payload: { text: 'a\u0000b' } }, 'NUL in the payload', /NUL/);
  await refusedAndNothingWritten({ ...task, metadata: { ...task.metadata, name: 'x\ud800' } }, 'lone high surrogate', /lone surrogate/);
  await refusedAndNothingWritten({ ...task, tags: { ['\udfffkey']: 'v' } }, 'lone low surrogate in a key', /lone surrogate/);
  await refusedAndNothingWritten({ ...task, routes: ['index.\u0000'] }, 'NUL in a route', /NUL/);
  const paired = await q('PUT', `/task/${slugid.nice()}`, { ...task, metadata: { ...task.metadata, name: 'rocket \ud83d\ude80' } });
  assert.equal(paired.status, 200, 'a surrogate pair (an emoji) is fine');
});

test('a leap-second date is a 400, not an invalid Date written back', async () => {
  const day = new Date().toISOString().slice(0, 10);
  await refusedAndNothingWritten({ ...fastTask('leap'), created: `${day}T23:59:60Z` }, 'leap second in created', /created .* not a date/);
  await refusedAndNothingWritten({ ...fastTask('leap'), expires: '2030-12-31T23:59:60Z' }, 'leap second in expires', /expires .* not a date/);
});

test('query parameters named like Object.prototype members are unknown parameters, not a 500', async () => {
  for (const name of ['__proto__', 'constructor', 'toString', 'hasOwnProperty']) {
    const res = await t.request('GET', `/api/scheduler/v1/task-graphs?${name}=x`);
    assertRefusal(res, name);
    assert.equal(res.status, 400, name);
    assert.match(res.body.message, /Unknown query parameter/, name);
  }
});

test('a URL fastify cannot decode is a 400 in Taskcluster shape', async () => {
  for (const path of ['/task/%zz', '/task/%/status', `/task/${slugid.nice()}/artifacts/a%`]) {
    const res = await q('GET', path);
    assertRefusal(res, path);
    assert.equal(res.status, 400, path);
  }
});

test('cancelTaskGroup checks scopes before telling whether the group is sealed', async () => {
  const taskId = slugid.nice();
  assert.equal((await q('PUT', `/task/${taskId}`, fastTask('group'))).status, 200);
  const clientId = `hostile/${randomBytes(4).toString('hex')}`;
  const created = await t.request('PUT', `/api/auth/v1/clients/${encodeURIComponent(clientId)}`, { description: 'none', expires: new Date(Date.now() + 3600_000).toISOString(), scopes: [] });
  const noScopes = { clientId, accessToken: created.body.accessToken };
  const anonymous = await q('POST', `/task-group/${taskId}/cancel`, undefined, null);
  assert.equal(anonymous.status, 403, JSON.stringify(anonymous.body));
  const scopeless = await t.request('POST', `/api/queue/v1/task-group/${taskId}/cancel`, undefined, noScopes);
  assert.equal(scopeless.status, 403, JSON.stringify(scopeless.body));
  assert.equal((await q('POST', `/task-group/${taskId}/cancel`)).status, 409, 'with scopes: not sealed');
});

test('a continuationToken tgs did not make is a 400, not a 500', async () => {
  const taskId = slugid.nice();
  assert.equal((await q('PUT', `/task/${taskId}`, fastTask('paged'))).status, 200);
  // AAAA decodes to three NUL bytes, /w to invalid UTF-8
  for (const path of ['/api/auth/v1/clients/', `/api/queue/v1/task-group/${taskId}/list`, `/api/queue/v1/task/${taskId}/dependents`, `/api/queue/v1/task/${taskId}/runs/0/artifacts`]) {
    for (const token of ['AAAA', '_w', 'AA']) {
      const res = await t.request('GET', `${path}?continuationToken=${token}`);
      assertRefusal(res, `${path} ${token}`);
      assert.equal(res.status, 400, `${path} ${token}`);
    }
  }
  const page = await t.request('GET', '/api/auth/v1/clients/?limit=1');
  assert.equal(page.status, 200);
  const next = await t.request('GET', `/api/auth/v1/clients/?limit=1&continuationToken=${page.body.continuationToken}`);
  assert.equal(next.status, 200, 'a token tgs made still pages');
});

test('route parameters holding NUL are a 400 (artifact names and labels reach SQL)', async () => {
  for (const path of [`/api/queue/v1/task/${slugid.nice()}/runs/0/artifact-info/a%00b`, `/api/scheduler/v1/task-graph/${slugid.nice()}/inspect/%00`]) {
    const res = await t.request('GET', path);
    assertRefusal(res, path);
    assert.equal(res.status, 400, path);
  }
});

test('listTaskGraphs: a continuationToken whose time is past bigint is a 400', async () => {
  for (const key of ['9999999999999999999.x', '-9999999999999999999.x', '100000000000000000.x']) {
    const res = await t.request('GET', `/api/scheduler/v1/task-graphs?continuationToken=${Buffer.from(key).toString('base64url')}`);
    assertRefusal(res, key);
    assert.equal(res.status, 400, key);
  }
});

test('taskQueueId and provisionerId/workerType given together must agree', async () => {
  const { provisionerId: _p, workerType: _w, ...rest } = fastTask('queue id');
  await refusedAndNothingWritten({ ...fastTask('queue id'), taskQueueId: 'other/queue' }, 'disagreeing forms', /taskQueueId must equal/);
  await refusedAndNothingWritten({ ...rest, taskQueueId: '/ ' }, 'empty provisionerId', /provisionerId/);
  const taskId = slugid.nice();
  assert.equal((await q('PUT', `/task/${taskId}`, { ...fastTask('queue id'), taskQueueId: 'tgs-test/fast' })).status, 200, 'agreeing forms');
  const only = slugid.nice();
  assert.equal((await q('PUT', `/task/${only}`, { ...rest, taskQueueId: 'tgs-test/queue-only' })).status, 200, 'taskQueueId alone');
  assert.deepEqual(((await q('GET', `/task/${only}`)).body as { workerType: string }).workerType, 'queue-only');
});
