import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, hawkHeader, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';

let t: TestApi;
before(async () => {
  t = await startTestApi({ claimWorkWaitMs: 200 });
});
after(async () => {
  await t.close();
});

const q = (method: string, path: string, body?: unknown) => t.request(method, `/api/queue/v1${path}`, body);

/** Every row the queue can write: a refused request must leave all of these as they were. */
async function snapshot(): Promise<Record<string, number>> {
  const { rows } = await t.db.pool.query<Record<string, number>>(
    `SELECT (SELECT count(*)::int FROM tasks) AS tasks, (SELECT count(*)::int FROM task_groups) AS groups,
            (SELECT count(*)::int FROM task_dependencies) AS dependencies, (SELECT count(*)::int FROM outbox) AS outbox,
            (SELECT count(*)::int FROM artifacts) AS artifacts,
            (SELECT coalesce(sum(jsonb_array_length(runs)), 0)::int FROM tasks) AS runs`,
  );
  return rows[0];
}

function assertTcError(res: { status: number; body: any }, status: number, what: string, code = /^Input(Validation)?Error$/) {
  assert.equal(res.status, status, `${what}: ${JSON.stringify(res.body)}`);
  assert.match(res.body.code, code, what);
  assert.equal(typeof res.body.message, 'string', what);
  assert.ok(res.body.message.length > 0, what);
  assert.equal(typeof res.body.requestInfo, 'object', `${what}: requestInfo`);
  assert.equal(typeof res.body.requestInfo.time, 'string', `${what}: requestInfo.time`);
}

const valid = () => fastTask('bad-input', ['completed'], {});
const days = (n: number) => new Date(Date.now() + n * 24 * 3600 * 1000).toISOString();

test('createTask: every kind of bad definition is a 400 in Taskcluster shape and writes nothing', async () => {
  const existing = slugid.nice();
  assert.equal((await q('PUT', `/task/${existing}`, valid())).status, 200);
  const before = await snapshot();
  const longName = 'n'.repeat(256);
  const cases: [string, unknown, RegExp?][] = [
    ['malformed JSON', '{"provisionerId": "tgs-test", ', /Malformed JSON/],
    ['JSON that is not an object', '[1, 2, 3]'],
    ['empty body', ''],
    ['wrong type: retries as a string', { ...valid(), retries: '5' }, /retries/],
    ['wrong type: payload as an array', { ...valid(), payload: [] }, /payload/],
    ['wrong type: tags value a number', { ...valid(), tags: { a: 1 } }, /tags/],
    ['wrong type: routes a string', { ...valid(), routes: 'index.a' }, /routes/],
    ['unknown priority', { ...valid(), priority: 'urgent' }, /priority/],
    ['unknown requires', { ...valid(), requires: 'some-completed' }, /requires/],
    ['retries out of range', { ...valid(), retries: 50 }, /retries/],
    ['negative retries', { ...valid(), retries: -1 }, /retries/],
    ['unknown top-level property', { ...valid(), colour: 'red' }, /colour/],
    ['unknown metadata property', { ...valid(), metadata: { ...valid().metadata, team: 'x' } }, /team/],
    ['missing metadata field', { ...valid(), metadata: { name: 'x', description: 'y', owner: 'z' } }, /source/],
    ['oversize metadata.name', { ...valid(), metadata: { ...valid().metadata, name: longName } }, /name/],
    ['oversize provisionerId', { ...valid(), provisionerId: 'p'.repeat(23) }, /provisionerId/],
    ['bad characters in workerType', { ...valid(), workerType: 'worker/type' }, /workerType/],
    ['oversize tag value', { ...valid(), tags: { a: 'v'.repeat(4097) } }, /tags/],
    ['oversize route', { ...valid(), routes: ['r'.repeat(250)] }, /routes/],
    ['too many routes', { ...valid(), routes: Array.from({ length: 65 }, (_, i) => `index.r${i}`) }, /routes/],
    ['duplicate routes', { ...valid(), routes: ['index.a', 'index.a'] }, /routes/],
    ['too many dependencies', { ...valid(), dependencies: Array.from({ length: 10_001 }, () => slugid.nice()) }, /dependencies/],
    ['bad taskGroupId slugid', { ...valid(), taskGroupId: 'not-a-slugid' }, /taskGroupId/],
    ['bad dependency slugid', { ...valid(), dependencies: [existing, 'zzz'] }, /dependencies/],
    ['dependency on itself', valid(), /itself/],
    ['missing dependency', { ...valid(), dependencies: [slugid.nice()] }, /do not exist/],
    ['metadata.source not a URL', { ...valid(), metadata: { ...valid().metadata, source: 'ftp://x' } }, /source/],
    ['created not a date', { ...valid(), created: 'yesterday' }, /created/],
    ['created an hour ago', { ...valid(), created: new Date(Date.now() - 3600_000).toISOString() }, /created/],
    ['deadline in the past', { ...valid(), deadline: new Date(Date.now() - 1000).toISOString() }, /deadline/],
    ['deadline over 5 days after created', { ...valid(), deadline: days(5.1) }, /deadline/],
    ['expires before deadline', { ...valid(), expires: new Date(Date.now() + 60_000).toISOString() }, /expires/],
    ['scope with two trailing stars', { ...valid(), scopes: ['queue:**'] }, /scope/],
    ['scope with a control character', { ...valid(), scopes: ['queue:\n'] }, /scopes/],
    ['routing with bad characters', { ...valid(), routing: 'a b' }, /routing/],
  ];
  const fresh = slugid.nice();
  for (const [what, body, message] of cases) {
    // the self-dependency case names the task being created
    const payload = what === 'dependency on itself' ? { ...(body as object), dependencies: [fresh] } : body;
    const res = await q('PUT', `/task/${fresh}`, payload);
    assertTcError(res, 400, what);
    if (message) assert.match(res.body.message, message, what);
  }
  assert.equal((await q('GET', `/task/${fresh}`)).status, 404);
  assert.deepEqual(await snapshot(), before, 'nothing was written');
});

test('bad ids, query parameters, content types and sizes are refused before anything is written', async () => {
  const before = await snapshot();
  assertTcError(await q('PUT', '/task/not-a-slugid', valid()), 400, 'bad taskId slugid');
  assertTcError(await q('PUT', `/task/${slugid.nice()}x`, valid()), 400, 'taskId one character too long');
  assertTcError(await q('GET', `/task-group/${slugid.nice()}/list?limit=0`), 400, 'limit 0');
  assertTcError(await q('GET', `/task-group/${slugid.nice()}/list?colour=red`), 400, 'unknown query parameter');
  assertTcError(await q('POST', '/task/zz/runs/0/completed'), 400, 'bad taskId in a report');
  assertTcError(await q('POST', `/task/${slugid.nice()}/runs/x/completed`), 400, 'runId not a number');

  const taskId = slugid.nice();
  const url = `${t.rootUrl}/api/queue/v1/task/${taskId}`;
  const asText = await fetch(url, {
    method: 'PUT',
    headers: { 'content-type': 'text/plain', authorization: hawkHeader(url, 'PUT', t.root) },
    body: JSON.stringify(valid()),
  });
  assert.equal(asText.status, 400, 'a task sent as text/plain');
  assert.match(((await asText.json()) as { code: string }).code, /^Input(Validation)?Error$/);

  const huge = await q('PUT', `/task/${taskId}`, { ...valid(), payload: { blob: 'x'.repeat(11 * 1024 * 1024) } });
  assertTcError(huge, 413, 'body over the limit', /^InputTooLarge$/);
  assert.deepEqual(await snapshot(), before, 'nothing was written');
});

test('claimWork and reports: bad bodies are 400 and claim nothing', async () => {
  const taskId = slugid.nice();
  assert.equal((await q('PUT', `/task/${taskId}`, { ...valid(), workerType: 'bad-claims' })).status, 200);
  const before = await snapshot();
  const cases: [string, unknown][] = [
    ['tasks 0', { workerGroup: 'g', workerId: 'w', tasks: 0 }],
    ['tasks over 32', { workerGroup: 'g', workerId: 'w', tasks: 33 }],
    ['tasks as a string', { workerGroup: 'g', workerId: 'w', tasks: '1' }],
    ['missing workerId', { workerGroup: 'g', tasks: 1 }],
    ['oversize workerGroup', { workerGroup: 'g'.repeat(39), workerId: 'w', tasks: 1 }],
    ['bad characters in workerId', { workerGroup: 'g', workerId: 'w.1', tasks: 1 }],
    ['unknown property', { workerGroup: 'g', workerId: 'w', tasks: 1, capacity: 2 }],
    ['malformed JSON', '{"workerGroup": '],
  ];
  for (const [what, body] of cases) assertTcError(await q('POST', '/claim-work/tgs-test/bad-claims', body), 400, what);
  assertTcError(await q('POST', '/claim-work/tgs-test/bad.claims', { workerGroup: 'g', workerId: 'w', tasks: 1 }), 400, 'bad workerType');
  assert.deepEqual(await snapshot(), before, 'nothing claimed, nothing written');
  const status = await q('GET', `/task/${taskId}/status`);
  assert.equal(status.body.status.state, 'pending');

  const claimed = await q('POST', '/claim-work/tgs-test/bad-claims', { workerGroup: 'g', workerId: 'w', tasks: 1 });
  assert.equal(claimed.body.tasks.length, 1);
  const afterClaim = await snapshot();
  for (const [what, body] of [
    ['unknown reason', { reason: 'bored' }],
    ['no reason', {}],
    ['extra property', { reason: 'worker-shutdown', note: 'x' }],
  ] as const) {
    assertTcError(await q('POST', `/task/${taskId}/runs/0/exception`, body), 400, what);
  }
  assertTcError(await q('POST', `/task/${taskId}/runs/0/completed`, { result: 'ok' }), 400, 'a body where none is taken');
  assert.deepEqual(await snapshot(), afterClaim);
  assert.equal((await q('GET', `/task/${taskId}/status`)).body.status.state, 'running');
});
