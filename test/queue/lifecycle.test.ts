import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { eventually } from '../../support/stack.js';
import { renderedOutbox } from '../helpers/outbox.js';
import { UNPUBLISHED_COUNT } from '../../src/exchanges/outbox.js';

let t: TestApi;
before(async () => {
  // short claims and a fast sweep so claim expiry and deadlines happen within the test
  t = await startTestApi({ claimTimeoutSeconds: 1, claimWorkWaitMs: 1500, sweepIntervalMs: 200 });
});
after(async () => {
  await t.close();
});

const q = (method: string, path: string, body?: unknown, creds?: Parameters<TestApi['request']>[3]) => t.request(method, `/api/queue/v1${path}`, body, creds);

async function create(extra: Record<string, unknown> = {}, workerType = 'lifecycle') {
  const taskId = slugid.nice();
  const res = await q('PUT', `/task/${taskId}`, { ...fastTask('t'), workerType, ...extra });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return taskId;
}

async function claim(workerType: string, tasks = 1) {
  const res = await q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'grp', workerId: 'wkr', tasks });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body.tasks as { status: { taskId: string }; runId: number; takenUntil: string; credentials: { clientId: string; accessToken: string; certificate: string } }[];
}

async function outbox(taskId: string) {
  const messages = (await renderedOutbox(t.db.pool, t.config)).filter((m) => m.routingKey.startsWith(`${taskId}.`));
  return messages.map((m) => `${m.exchange.replace(t.config.exchangePrefix, '').replace('queue/v1/', '')} ${m.routingKey}`);
}

test('create → claim → completed, with the messages and routing keys of docs/formats.md § Queue exchanges', async () => {
  const taskId = await create({ routes: ['index.a'] }, 'life1');
  const again = await q('PUT', `/task/${taskId}`, { ...fastTask('t'), workerType: 'life1', routes: ['index.a'] });
  assert.equal(again.status, 409, 'a different created time is a different definition');
  const [c] = await claim('life1');
  assert.equal(c.status.taskId, taskId);
  assert.match(c.credentials.clientId, new RegExp(`^task-client/${taskId}/0/on/grp/wkr$`));
  const done = await q('POST', `/task/${taskId}/runs/0/completed`, undefined, c.credentials);
  assert.equal(done.status, 200);
  assert.equal(done.body.status.state, 'completed');
  const repeat = await q('POST', `/task/${taskId}/runs/0/completed`, undefined, c.credentials);
  assert.equal(repeat.status, 200, 'reporting the same result again is idempotent');
  const conflicting = await q('POST', `/task/${taskId}/runs/0/failed`, undefined, c.credentials);
  assert.equal(conflicting.status, 409);
  assert.deepEqual(await outbox(taskId), [
    `task-defined ${taskId}._._._.tgs-test.life1.-.${taskId}._`,
    `task-pending ${taskId}.0._._.tgs-test.life1.-.${taskId}._`,
    `task-running ${taskId}.0.grp.wkr.tgs-test.life1.-.${taskId}._`,
    `task-completed ${taskId}.0.grp.wkr.tgs-test.life1.-.${taskId}._`,
  ]);
  const messages = (await renderedOutbox(t.db.pool, t.config)).filter((m) => m.routingKey.startsWith(`${taskId}.`));
  assert.equal(messages.length, 4);
  for (const m of messages) assert.deepEqual(m.cc, ['route.index.a'], `${m.exchange} carries the task's routes as CC`);
});

test('per-run credentials work for their own run and are refused for another task (403)', async () => {
  const a = await create({}, 'life2');
  const b = await create({}, 'life2');
  const claimed = await claim('life2', 2);
  const forA = claimed.find((c) => c.status.taskId === a);
  assert.ok(forA && claimed.some((c) => c.status.taskId === b));
  const wrong = await q('POST', `/task/${b}/runs/0/completed`, undefined, forA.credentials);
  assert.equal(wrong.status, 403);
  assert.equal(wrong.body.code, 'InsufficientScopes');
  const reclaim = await q('POST', `/task/${a}/runs/0/reclaim`, undefined, forA.credentials);
  assert.equal(reclaim.status, 200);
  assert.ok(new Date(reclaim.body.takenUntil) >= new Date(forA.takenUntil));
});

test('highest priority first, FIFO within a priority', async () => {
  const low1 = await create({ priority: 'low' }, 'life3');
  const high = await create({ priority: 'high' }, 'life3');
  const low2 = await create({ priority: 'low' }, 'life3');
  const highest = await create({ priority: 'highest' }, 'life3');
  const order = (await claim('life3', 4)).map((c) => c.status.taskId);
  assert.deepEqual(order, [highest, high, low1, low2]);
});

test('worker-shutdown retries the task while retries last; malformed-payload does not', async () => {
  const taskId = await create({ retries: 1 }, 'life4');
  let [c] = await claim('life4');
  let res = await q('POST', `/task/${taskId}/runs/0/exception`, { reason: 'worker-shutdown' }, c.credentials);
  assert.equal(res.body.status.state, 'pending');
  assert.equal(res.body.status.runs[1].reasonCreated, 'retry');
  [c] = await claim('life4');
  assert.equal(c.runId, 1);
  res = await q('POST', `/task/${taskId}/runs/1/exception`, { reason: 'worker-shutdown' }, c.credentials);
  assert.equal(res.body.status.state, 'exception', 'no retries left');
  const bad = await q('POST', `/task/${taskId}/runs/1/exception`, { reason: 'bored' }, c.credentials);
  assert.equal(bad.status, 400);
});

test('an expired claim is retried; a past deadline resolves exception deadline-exceeded', async () => {
  const taskId = await create({ retries: 1 }, 'life5');
  await claim('life5');
  const status = await eventually(async () => {
    const s = await q('GET', `/task/${taskId}/status`, undefined, null);
    return s.body.status.runs.length === 2 ? s.body.status : undefined;
  }, 'claim expiry', 15_000);
  assert.equal(status.runs[0].reasonResolved, 'claim-expired');
  assert.equal(status.runs[1].reasonCreated, 'retry');

  const now = Date.now();
  const shortLived = await create({ deadline: new Date(now + 1500).toISOString() }, 'life5-nobody');
  const after = await eventually(async () => {
    const s = await q('GET', `/task/${shortLived}/status`, undefined, null);
    return s.body.status.state === 'exception' ? s.body.status : undefined;
  }, 'deadline', 15_000);
  assert.equal(after.runs[0].reasonResolved, 'deadline-exceeded');
});

test('rerun adds a run to a resolved task; cancel resolves an unresolved one; dependents are listed', async () => {
  const taskId = await create({}, 'life6');
  const [c] = await claim('life6');
  await q('POST', `/task/${taskId}/runs/0/failed`, undefined, c.credentials);
  const rerun = await q('POST', `/task/${taskId}/rerun`);
  assert.equal(rerun.body.status.state, 'pending');
  assert.equal(rerun.body.status.runs[1].reasonCreated, 'rerun');
  const dependent = await create({ dependencies: [taskId] }, 'life6');
  const listed = await q('GET', `/task/${taskId}/dependents`, undefined, null);
  assert.deepEqual(listed.body.tasks.map((x: { status: { taskId: string } }) => x.status.taskId), [dependent]);
  const dep = await q('GET', `/task/${dependent}/status`, undefined, null);
  assert.equal(dep.body.status.state, 'unscheduled');
  const canceled = await q('POST', `/task/${dependent}/cancel`);
  assert.equal(canceled.body.status.state, 'exception');
  assert.equal(canceled.body.status.runs[0].reasonResolved, 'canceled');
});

test('bad input is a 400 in Taskcluster shape and writes nothing', async () => {
  const count = async () => Number((await t.db.pool.query(`SELECT (SELECT count(*) FROM tasks) + ${UNPUBLISHED_COUNT} AS n`)).rows[0].n);
  const before = await count();
  const id = slugid.nice();
  const cases: [string, unknown][] = [
    ['malformed JSON', '{"provisionerId":'],
    ['wrong type', { ...fastTask('x'), retries: 'five' }],
    ['oversize field', { ...fastTask('x'), metadata: { ...fastTask('x').metadata, name: 'n'.repeat(300) } }],
    ['unknown property', { ...fastTask('x'), colour: 'red' }],
    ['bad dependency slugid', { ...fastTask('x'), dependencies: ['not-a-slugid'] }],
    ['deadline too far', { ...fastTask('x'), deadline: new Date(Date.now() + 6 * 24 * 3600 * 1000).toISOString() }],
    ['created too old', { ...fastTask('x'), created: new Date(Date.now() - 3600 * 1000).toISOString() }],
  ];
  for (const [what, body] of cases) {
    const res = await q('PUT', `/task/${id}`, body);
    assert.equal(res.status, 400, what);
    assert.match(res.body.code, /^Input(Validation)?Error$/, what);
    assert.equal(typeof res.body.message, 'string');
  }
  const badId = await q('PUT', '/task/nope', fastTask('x'));
  assert.equal(badId.status, 400);
  assert.equal(await count(), before);
});

test('a client without the create-task scope gets 403 naming it', async () => {
  await t.db.pool.query(
    `INSERT INTO clients (client_id, access_token, scopes, expires) VALUES ('limited', 'limited-token', $1, now() + interval '1 hour')`,
    [['queue:scheduler-id:-']],
  );
  const res = await q('PUT', `/task/${slugid.nice()}`, fastTask('x'), { clientId: 'limited', accessToken: 'limited-token' });
  assert.equal(res.status, 403);
  assert.match(res.body.message, /queue:create-task:lowest:tgs-test\/fast/);
});

test('claimWork long-polls and returns as soon as a task is created', async () => {
  const started = Date.now();
  const pending = claim('life7');
  await new Promise((r) => setTimeout(r, 300));
  const taskId = await create({}, 'life7');
  const [c] = await pending;
  assert.equal(c.status.taskId, taskId);
  assert.ok(Date.now() - started < 1500, 'answered before the 1.5 s poll ended');
  // complete it before the 1 s claim expires (an expired claim would be retried and claimed again)
  assert.equal((await q('POST', `/task/${taskId}/runs/0/completed`, undefined, c.credentials)).status, 200);
  const empty = await claim('life7');
  assert.deepEqual(empty, [], 'an empty answer after the poll');
});
