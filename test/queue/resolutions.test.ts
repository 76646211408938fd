import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, type Credentials, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { eventually } from '../../support/stack.js';
import { renderedOutbox } from '../helpers/outbox.js';
import { databaseFingerprint } from '../helpers/dbState.js';
import { MAX_RESOLUTIONS } from '../../src/queue/api/resolutions.js';

/*
 * reportResolutions (POST /task-resolutions): a batch resolves runs exactly as the single reports would,
 * answers per item, and refuses the whole batch (writing nothing) when a scope or the body is wrong.
 */

let t: TestApi;
before(async () => {
  // claims short enough to expire within the test (a fast sweep), long enough for the reports of the others
  t = await startTestApi({ claimTimeoutSeconds: 4, claimWorkWaitMs: 1500, sweepIntervalMs: 200 });
});
after(async () => {
  await t.close();
});

const q = (method: string, path: string, body?: unknown, creds?: Credentials | null) => t.request(method, `/api/queue/v1${path}`, body, creds);
const batch = (resolutions: unknown[], creds?: Credentials | null) => q('POST', '/task-resolutions', { resolutions }, creds);

/** Tasks created and claimed (all of them, one claimWork) on a worker type of their own. */
async function claimedTasks(workerType: string, definitions: Record<string, unknown>[]): Promise<string[]> {
  const taskIds: string[] = [];
  for (const extra of definitions) {
    const taskId = slugid.nice();
    const res = await q('PUT', `/task/${taskId}`, { ...fastTask('t'), workerType, ...extra });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    taskIds.push(taskId);
  }
  const res = await q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'grp', workerId: 'wkr', tasks: definitions.length });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.tasks.length, definitions.length);
  return taskIds;
}

/** JSON with these taskIds as T0, T1, …, the worker type as W and every time as `<time>`. */
function normalize(value: unknown, taskIds: string[], workerType: string) {
  let text = JSON.stringify(value);
  taskIds.forEach((id, i) => (text = text.replaceAll(id, `T${i}`)));
  return JSON.parse(text.replaceAll(workerType, 'W').replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?Z/g, '<time>'));
}

/** Everything the database holds about these tasks (normalized), their messages in the outbox's order. */
async function snapshot(taskIds: string[], workerType: string) {
  await t.api.deps.groupAnnouncer.flush();
  const { rows } = await t.db.pool.query(
    `SELECT task_id, state, runs, retries_left, taken_until IS NOT NULL AS claimed, pending_since IS NOT NULL AS queued
     FROM tasks WHERE task_id = ANY($1)`,
    [taskIds],
  );
  const byId = new Map(rows.map((r) => [r.task_id, r]));
  const all = (await renderedOutbox(t.db.pool, t.config)).filter((m) => taskIds.some((id) => JSON.stringify(m).includes(id)));
  const announcement = (m: { exchange: string }) => m.exchange.endsWith('task-group-resolved');
  const messages = all.filter((m) => !announcement(m)).map(({ exchange, routingKey, cc, payload, messageId }) => ({ exchange, routingKey, cc, payload, messageId }));
  // the announcements follow the reports' commits every 50 ms (GroupAnnouncer), whenever that falls: which, not when
  const groupsResolved = all.filter(announcement).map((m) => ({ routingKey: m.routingKey, payload: m.payload }));
  const normalized = normalize({ rows: taskIds.map((id) => byId.get(id)), messages, groupsResolved }, taskIds, workerType);
  normalized.groupsResolved.sort((a: { routingKey: string }, b: { routingKey: string }) => a.routingKey.localeCompare(b.routingKey));
  return normalized;
}

/** What each report does, as both paths say it. */
const REPORTS: { outcome: 'completed' | 'failed' | 'exception'; reason?: string; definition: Record<string, unknown> }[] = [
  { outcome: 'completed', definition: { routes: ['index.a'] } },
  { outcome: 'failed', definition: {} },
  { outcome: 'exception', reason: 'malformed-payload', definition: {} },
  { outcome: 'exception', reason: 'worker-shutdown', definition: { retries: 2 } },
  { outcome: 'exception', reason: 'intermittent-task', definition: { retries: 0 } },
  { outcome: 'exception', reason: 'internal-error', definition: {} },
];

/** No item retries its task: the batch is written by one statement (src/queue/resolveTask.ts RESOLVE_MANY_SQL). */
const RESOLVED_IN_ONE = REPORTS.filter((r) => r.reason !== 'worker-shutdown' && r.reason !== 'intermittent-task');

for (const [name, reports, pending, announced] of [
  ['', REPORTS, 7, 5],
  [', every item in one statement', RESOLVED_IN_ONE, 4, 4],
] as const) {
  test(`a batch resolves runs exactly as the single reports do: rows, answers and messages${name}`, async () => {
    const workerType = `res${reports.length}`;
    const single = await claimedTasks(`${workerType}-single`, reports.map((r) => r.definition));
    const singleAnswers = [];
    for (const [i, r] of reports.entries()) {
      const res = await q('POST', `/task/${single[i]}/runs/0/${r.outcome}`, r.reason ? { reason: r.reason } : undefined);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      singleAnswers.push(res.body.status);
    }
    const batched = await claimedTasks(`${workerType}-batch`, reports.map((r) => r.definition));
    const res = await batch(reports.map((r, i) => ({ taskId: batched[i], runId: 0, outcome: r.outcome, ...(r.reason ? { reason: r.reason } : {}) })));
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(
      res.body.resolutions.map((r: { taskId: string; runId: number }) => [r.taskId, r.runId]),
      batched.map((id) => [id, 0]),
      'one answer per item, in order',
    );
    assert.deepEqual(
      normalize(res.body.resolutions.map((r: { status: unknown }) => r.status), batched, `${workerType}-batch`),
      normalize(singleAnswers, single, `${workerType}-single`),
      'each item answers the status the single report answered',
    );
    const expected = await snapshot(single, `${workerType}-single`);
    assert.equal(expected.messages.filter((m: { exchange: string }) => m.exchange.endsWith('task-pending')).length, pending, 'one a task created, one a retry');
    assert.equal(expected.groupsResolved.length, announced, "every group but a retried task's was announced");
    assert.deepEqual(await snapshot(batched, `${workerType}-batch`), expected);
    if (reports === RESOLVED_IN_ONE) {
      const { rows } = await t.db.pool.query(`SELECT render FROM outbox WHERE message_id = ANY($1) ORDER BY id`, [batched.map((id) => `${id}/0/task-${reports[batched.indexOf(id)].outcome}`)]);
      assert.deepEqual(rows.map((r) => r.render), reports.map((r) => `task-${r.outcome}`), 'the resolutions were written as snapshots, in the batch\'s order');
    }
  });
}

test('repeating a batch is idempotent: the same answers, nothing written', async () => {
  const ids = await claimedTasks('res-repeat', [{}, {}]);
  const items = [
    { taskId: ids[0], runId: 0, outcome: 'completed' },
    { taskId: ids[1], runId: 0, outcome: 'exception', reason: 'malformed-payload' },
  ];
  const first = await batch(items);
  assert.equal(first.status, 200, JSON.stringify(first.body));
  await t.api.deps.groupAnnouncer.flush();
  const written = await databaseFingerprint(t.db.pool);
  const again = await batch(items);
  assert.equal(again.status, 200, JSON.stringify(again.body));
  assert.deepEqual(again.body, first.body);
  await t.api.deps.groupAnnouncer.flush();
  assert.deepEqual(await databaseFingerprint(t.db.pool), written, 'a repeated batch writes nothing');
});

test('per-item refusals (404, 409, claim expired) are answers; the other items resolve', async () => {
  // a claim that expires: the sweep resolves run 0 as claim-expired and retries the task, as for a single report
  const [expired] = await claimedTasks('res-expire', [{}]);
  await eventually(async () => (await q('GET', `/task/${expired}/status`)).body.status.runs[0].state === 'exception', 'the claim expired');
  const [done, good, twice] = await claimedTasks('res-items', [{}, {}, {}]);
  assert.equal((await q('POST', `/task/${done}/runs/0/completed`)).status, 200);
  const unknown = slugid.nice();
  const res = await batch([
    { taskId: unknown, runId: 0, outcome: 'completed' },
    { taskId: done, runId: 0, outcome: 'failed' },
    { taskId: good, runId: 0, outcome: 'completed' },
    { taskId: done, runId: 1, outcome: 'completed' },
    { taskId: expired, runId: 0, outcome: 'completed' },
    { taskId: twice, runId: 0, outcome: 'failed' },
    { taskId: twice, runId: 0, outcome: 'failed' },
    { taskId: twice, runId: 0, outcome: 'completed' },
  ]);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const answers = res.body.resolutions as { taskId: string; runId: number; status?: { state: string }; error?: { code: string; message: string } }[];
  assert.deepEqual(
    answers.map((a) => a.error?.code ?? a.status?.state),
    ['ResourceNotFound', 'RequestConflict', 'completed', 'ResourceNotFound', 'RequestConflict', 'failed', 'failed', 'RequestConflict'],
  );
  assert.match(answers[0].error!.message, new RegExp(`task ${unknown} not found`));
  assert.match(answers[1].error!.message, /run 0 of task .* is completed, not running/);
  assert.equal(answers[0].taskId, unknown);
  for (const [taskId, state] of [[good, 'completed'], [twice, 'failed'], [done, 'completed']]) {
    assert.equal((await q('GET', `/task/${taskId}/status`)).body.status.state, state, taskId);
  }
  const failures = (await renderedOutbox(t.db.pool, t.config)).filter((m) => m.exchange.endsWith('task-failed') && m.routingKey.startsWith(`${twice}.`));
  assert.equal(failures.length, 1, 'a run reported twice in one batch is resolved once');
});

test('a scope missing for one item refuses the whole batch with 403 naming it, and nothing is written', async () => {
  const ids = await claimedTasks('res-scopes', [{}, {}]);
  // per-run credentials (as claimWork hands them out) cover their own run only
  const own = await runCredentials('res-scopes2');
  const items = [
    { taskId: own.taskId, runId: 0, outcome: 'completed' },
    { taskId: ids[0], runId: 0, outcome: 'completed' },
  ];
  await t.api.deps.groupAnnouncer.flush();
  await t.api.deps.workers.flush();
  const before = await databaseFingerprint(t.db.pool);
  const refused = await batch(items, own.credentials);
  assert.equal(refused.status, 403, JSON.stringify(refused.body));
  assert.equal(refused.body.code, 'InsufficientScopes');
  // (or the claimant's worker-id: the run's claimant is public, in its status)
  assert.match(refused.body.message, new RegExp(`lacks scopes: any of \\(queue:resolve-task:${ids[0]}/0, queue:worker-id:grp/wkr\\)$`));
  assert.equal(typeof refused.body.requestInfo, 'object', "Taskcluster's error shape");
  const anonymous = await batch(items, null);
  assert.equal(anonymous.status, 403, JSON.stringify(anonymous.body));
  assert.equal(anonymous.body.code, 'InsufficientScopes');
  assert.deepEqual(await databaseFingerprint(t.db.pool), before, 'a refused batch writes nothing');
  // its own run alone is fine with the same credentials
  const alone = await batch(items.slice(0, 1), own.credentials);
  assert.equal(alone.status, 200, JSON.stringify(alone.body));
  assert.equal(alone.body.resolutions[0].status.state, 'completed');
  // no claim of this test is left to expire under the next test's fingerprints
  assert.equal((await batch(ids.map((taskId) => ({ taskId, runId: 0, outcome: 'completed' })))).status, 200);
});

test('a least-privilege worker batches the reports of runs it claimed (queue:worker-id of the claimant), never another worker\'s or an unclaimed run', async () => {
  const workerType = 'res-least';
  const clientId = `workers/${slugid.nice()}`;
  const made = await t.request('PUT', `/api/auth/v1/clients/${encodeURIComponent(clientId)}`, {
    description: 'a worker with worker scopes only',
    expires: new Date(Date.now() + 3600_000).toISOString(),
    scopes: [`queue:claim-work:tgs-test/${workerType}`, 'queue:worker-id:grp-least/*'],
  });
  assert.equal(made.status, 200, JSON.stringify(made.body));
  const worker = { clientId, accessToken: made.body.accessToken as string };
  const claim = async (workerId: string, credentials: Credentials | undefined, n: number) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const taskId = slugid.nice();
      assert.equal((await q('PUT', `/task/${taskId}`, { ...fastTask('t'), workerType })).status, 200);
      ids.push(taskId);
    }
    const res = await q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: workerId === 'other' ? 'grp' : 'grp-least', workerId, tasks: n }, credentials);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.deepEqual(res.body.tasks.map((x: { status: { taskId: string } }) => x.status.taskId).sort(), [...ids].sort());
    return ids;
  };
  const mine = await claim('w1', worker, 2);
  // another worker's run (claimed by root as grp/other), and a run nobody claimed
  const theirs = await claim('other', undefined, 1);
  const unclaimed = slugid.nice();
  assert.equal((await q('PUT', `/task/${unclaimed}`, { ...fastTask('t'), workerType: 'res-nobody' })).status, 200);
  // what earlier reports and claims still have to write (a group's resolution 50 ms later, the workers' rows)
  await t.api.deps.groupAnnouncer.flush();
  await t.api.deps.workers.flush();
  const before = await databaseFingerprint(t.db.pool);
  for (const [stranger, label] of [[theirs[0], 'another worker\'s run'], [unclaimed, 'an unclaimed run']] as const) {
    const refused = await batch([...mine, stranger].map((taskId) => ({ taskId, runId: 0, outcome: 'completed' })), worker);
    assert.equal(refused.status, 403, `${label}: ${JSON.stringify(refused.body)}`);
    assert.match(refused.body.message, new RegExp(`queue:resolve-task:${stranger}/0`), label);
  }
  assert.deepEqual(await databaseFingerprint(t.db.pool), before, 'a refused batch writes nothing');
  const ok = await batch(mine.map((taskId) => ({ taskId, runId: 0, outcome: 'completed' })), worker);
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  assert.deepEqual(ok.body.resolutions.map((r: { status: { state: string } }) => r.status.state), ['completed', 'completed']);
  // the single reports keep Taskcluster's rule: the worker's own client cannot use them for its runs
  const single = await q('POST', `/task/${theirs[0]}/runs/0/completed`, undefined, worker);
  assert.equal(single.status, 403);
  assert.equal((await batch([{ taskId: theirs[0], runId: 0, outcome: 'completed' }])).status, 200);
});

/** A claimed task and the per-run credentials claimWork gave for it. */
async function runCredentials(workerType: string): Promise<{ taskId: string; credentials: Credentials }> {
  const taskId = slugid.nice();
  assert.equal((await q('PUT', `/task/${taskId}`, { ...fastTask('t'), workerType })).status, 200);
  const res = await q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'grp', workerId: 'wkr', tasks: 1 });
  assert.equal(res.body.tasks[0].status.taskId, taskId);
  return { taskId, credentials: res.body.tasks[0].credentials };
}

test('invalid bodies are refused with 400 before anything is resolved', async () => {
  const [taskId] = await claimedTasks('res-bodies', [{}]);
  const item = { taskId, runId: 0, outcome: 'completed' };
  await t.api.deps.groupAnnouncer.flush();
  await t.api.deps.workers.flush();
  const before = await databaseFingerprint(t.db.pool);
  const bodies: [string, unknown][] = [
    ['no items', { resolutions: [] }],
    [`more than ${MAX_RESOLUTIONS} items`, { resolutions: Array.from({ length: MAX_RESOLUTIONS + 1 }, () => item) }],
    ['exception without a reason', { resolutions: [item, { taskId, runId: 0, outcome: 'exception' }] }],
    ['a reason for completed', { resolutions: [item, { ...item, reason: 'worker-shutdown' }] }],
    ['an unknown reason', { resolutions: [item, { taskId, runId: 0, outcome: 'exception', reason: 'claim-expired' }] }],
    ['an unknown outcome', { resolutions: [item, { ...item, outcome: 'running' }] }],
    ['a bad taskId', { resolutions: [item, { ...item, taskId: 'not-a-slugid' }] }],
    ['runId as text', { resolutions: [item, { ...item, runId: '0' }] }],
    ['an unknown property', { resolutions: [item], extra: 1 }],
    ['no body', undefined],
  ];
  for (const [what, body] of bodies) {
    const res = await q('POST', '/task-resolutions', body);
    assert.equal(res.status, 400, `${what}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.code, 'InputValidationError', what);
  }
  assert.deepEqual(await databaseFingerprint(t.db.pool), before, 'refused bodies write nothing');
  assert.equal((await q('GET', `/task/${taskId}/status`)).body.status.state, 'running');
  const full = await batch(Array.from({ length: MAX_RESOLUTIONS }, () => item));
  assert.equal(full.status, 200, `${MAX_RESOLUTIONS} items are accepted`);
});
