import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import type pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';
import { fastTask } from '../../support/graphs.js';
import { loadConfig } from '../../src/config.js';
import { withTransaction } from '../../src/db/pool.js';
import { TgsError } from '../../src/errors.js';
import { testIssuer } from '../../support/issuer.js';
import { claimPending } from '../../src/queue/claimWork.js';
import { insertNewTasks } from '../../src/queue/createTasks.js';
import { validateTaskDefinition } from '../../src/queue/definition.js';
import { resolutionMessage } from '../../src/queue/messages.js';
import { resolveRun, resolveRuns } from '../../src/queue/resolveTask.js';
import { loadTask, resolveLatestRun, taskStatus, type TaskRow } from '../../src/queue/taskRow.js';
import { OUTBOX_COLUMNS, type OutboxRow } from '../../src/relay/outboxStore.js';
import { outboxMessage } from '../../src/relay/outboxMessage.js';
import { expireClaims } from '../../src/queue/sweeps.js';
import { MAX_RUNS } from '../../src/queue/run.js';
import { reportsPerStatement } from '../../src/observability/metrics.js';

const config = loadConfig({});
const issuer = testIssuer();
const groups = { note: () => undefined };
let db: TestDatabase;

before(async () => {
  db = await createTestDatabase();
});
after(async () => {
  await db.drop();
});

/** A pending task with routes, tags and retries, claimed: its row as the claim left it. */
async function claimedTask(pool: pg.Pool, workerType: string): Promise<TaskRow> {
  const taskId = slugid.nice();
  const now = new Date();
  const checked = validateTaskDefinition(
    { ...fastTask('r'), workerType, routes: ['index.a', 'notify.b'], tags: { kind: 'resolve' }, retries: 2, taskGroupId: slugid.nice() },
    taskId,
    now,
  );
  if ('errors' in checked) throw new Error(checked.errors.join('; '));
  await withTransaction(pool, (client) => insertNewTasks(client, [{ taskId, definition: checked.definition }], { scheduleIndependent: true, dependenciesKnown: true, now }));
  const [claimed] = await claimPending(pool, config, issuer, { provisionerId: 'tgs-test', workerType, workerGroup: 'grp', workerId: 'wkr', count: 1 });
  assert.equal(claimed?.status.taskId, taskId);
  return (await loadTask(pool, taskId)) as TaskRow;
}

async function outboxRowsOf(pool: pg.Pool, taskId: string) {
  const { rows } = await pool.query<OutboxRow>(
    `SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE message_id LIKE $1 || '/%' ORDER BY id`,
    [taskId],
  );
  return rows;
}

for (const [outcome, reason] of [['completed', undefined], ['failed', undefined], ['exception', 'malformed-payload'], ['exception', 'resource-unavailable']] as const) {
  test(`a running run reported ${reason ?? outcome} is stored and announced exactly as the read-check-write way would, in one statement`, async () => {
    const before = await claimedTask(db.pool, `rr-${outcome}`);
    const status = await resolveRun(db.pool, config, groups, before.task_id, 0, outcome, reason);
    const stored = (await loadTask(db.pool, before.task_id)) as TaskRow;
    // what the JavaScript way makes of the row as read, at the moment the statement wrote
    const expected = structuredClone(before);
    resolveLatestRun(expected, outcome, reason ?? outcome, new Date(stored.runs[0].resolved as string));
    assert.deepEqual(stored, expected);
    assert.deepEqual(status, taskStatus(expected));
    const { rows } = await db.pool.query('SELECT pending_since, taken_until FROM tasks WHERE task_id = $1', [before.task_id]);
    assert.deepEqual(rows[0], { pending_since: null, taken_until: null });
    const messages = await outboxRowsOf(db.pool, before.task_id);
    const resolution = messages.at(-1) as OutboxRow;
    assert.notEqual(resolution.render, null, 'the message was written by the one statement, as a snapshot the relay renders');
    assert.deepEqual(outboxMessage(config, resolution), { ...resolutionMessage(config, expected, 0), cc: ['route.index.a', 'route.notify.b'] });
  });
}

test('reports the one statement does not fit still get their answers: the same report again, a conflict, a missing run or task, a retry', async () => {
  const task = await claimedTask(db.pool, 'rr-rest');
  const first = await resolveRun(db.pool, config, groups, task.task_id, 0, 'completed');
  const again = await resolveRun(db.pool, config, groups, task.task_id, 0, 'completed');
  assert.deepEqual(again, first, 'the same report again answers the same status and writes nothing');
  assert.equal((await outboxRowsOf(db.pool, task.task_id)).filter((r) => r.render === 'task-completed').length, 1);
  const refused = async (run: () => Promise<unknown>, code: string) => {
    await assert.rejects(run, (err: unknown) => err instanceof TgsError && err.code === code);
  };
  await refused(() => resolveRun(db.pool, config, groups, task.task_id, 0, 'failed'), 'RequestConflict');
  await refused(() => resolveRun(db.pool, config, groups, task.task_id, 1, 'completed'), 'ResourceNotFound');
  await refused(() => resolveRun(db.pool, config, groups, task.task_id, 2 ** 40, 'completed'), 'ResourceNotFound');
  await refused(() => resolveRun(db.pool, config, groups, slugid.nice(), 0, 'completed'), 'ResourceNotFound');

  const retried = await claimedTask(db.pool, 'rr-retry');
  const status = await resolveRun(db.pool, config, groups, retried.task_id, 0, 'exception', 'worker-shutdown');
  assert.equal(status.state, 'pending');
  assert.deepEqual(status.runs.map((r) => [r.state, r.reasonCreated, r.reasonResolved]), [
    ['exception', 'scheduled', 'worker-shutdown'],
    ['pending', 'retry', undefined],
  ]);
  assert.equal(status.retriesLeft, 1);
});

/**
 * A claimed task moved to its 50th run (runId 49) with retries left, as a rerun leaves it (a rerun gives the retries
 * back): 49 runs resolved worker-shutdown before it.
 */
async function claimedAtLastRun(pool: pg.Pool, workerType: string, takenUntil?: Date): Promise<TaskRow> {
  const task = await claimedTask(pool, workerType);
  const earlier = Array.from({ length: MAX_RUNS - 1 }, (_, runId) => ({
    ...task.runs[0], runId, state: 'exception', reasonCreated: runId === 0 ? 'scheduled' : 'retry', reasonResolved: 'worker-shutdown', resolved: task.runs[0].scheduled,
  }));
  const last = { ...task.runs[0], runId: MAX_RUNS - 1, reasonCreated: 'rerun', ...(takenUntil ? { takenUntil: takenUntil.toISOString() } : {}) };
  await pool.query('UPDATE tasks SET runs = $2::jsonb, retries_left = 3, taken_until = coalesce($3, taken_until) WHERE task_id = $1', [
    task.task_id, JSON.stringify([...earlier, last]), takenUntil ?? null,
  ]);
  return (await loadTask(pool, task.task_id)) as TaskRow;
}

test('a run that would be the 51st is not made: at 50 runs a retrying exception or an expired claim resolves the task', async () => {
  const reported = await claimedAtLastRun(db.pool, 'rr-max');
  const status = await resolveRun(db.pool, config, groups, reported.task_id, MAX_RUNS - 1, 'exception', 'worker-shutdown');
  assert.equal(status.state, 'exception');
  assert.equal(status.runs.length, MAX_RUNS);
  assert.equal(status.retriesLeft, 3, 'no retry was used');
  // in a batch, next to a report of another task: each answered
  const [inBatch, other] = [await claimedAtLastRun(db.pool, 'rr-max'), await claimedTask(db.pool, 'rr-max')];
  const results = await resolveRuns(db.pool, config, groups, [
    { taskId: inBatch.task_id, runId: MAX_RUNS - 1, outcome: 'exception', reason: 'intermittent-task' },
    { taskId: other.task_id, runId: 0, outcome: 'completed' },
  ]);
  assert.deepEqual(results.map((r) => ('error' in r ? r.error.code : r.status.state)), ['exception', 'completed']);
  // the claim-expiry sweep, with a task it still retries in the same pass
  const past = new Date(Date.now() - 60_000);
  const expired = await claimedAtLastRun(db.pool, 'rr-max-expired', past);
  const retried = await claimedTask(db.pool, 'rr-max-expired');
  await db.pool.query('UPDATE tasks SET taken_until = $2 WHERE task_id = $1', [retried.task_id, past]);
  assert.equal(await expireClaims(db.pool, config), 2);
  const [expiredAfter, retriedAfter] = [(await loadTask(db.pool, expired.task_id)) as TaskRow, (await loadTask(db.pool, retried.task_id)) as TaskRow];
  assert.deepEqual([expiredAfter.state, expiredAfter.runs.length, expiredAfter.runs.at(-1)?.reasonResolved], ['exception', MAX_RUNS, 'claim-expired']);
  assert.deepEqual([retriedAfter.state, retriedAfter.runs.length], ['pending', 2]);
  // every message written about them renders
  for (const task of [reported, inBatch, expired]) {
    for (const row of await outboxRowsOf(db.pool, task.task_id)) assert.ok(outboxMessage(config, row).payload);
  }
});

test('a batch of distinct tasks the one statement fits: the items it does not write are answered the other way, in order', async () => {
  const [done, good, other] = [await claimedTask(db.pool, 'rb'), await claimedTask(db.pool, 'rb'), await claimedTask(db.pool, 'rb')];
  await resolveRun(db.pool, config, groups, done.task_id, 0, 'completed');
  const unknown = slugid.nice();
  const results = await resolveRuns(db.pool, config, groups, [
    { taskId: unknown, runId: 0, outcome: 'completed' },
    { taskId: done.task_id, runId: 0, outcome: 'failed' },
    { taskId: good.task_id, runId: 0, outcome: 'failed' },
    { taskId: other.task_id, runId: 3, outcome: 'completed' },
  ]);
  assert.deepEqual(
    results.map((r) => ('error' in r ? r.error.code : r.status.state)),
    ['ResourceNotFound', 'RequestConflict', 'failed', 'ResourceNotFound'],
  );
  assert.equal(((await loadTask(db.pool, other.task_id)) as TaskRow).state, 'running', 'a refused item writes nothing');
  const written = await outboxRowsOf(db.pool, good.task_id);
  assert.equal(written.at(-1)?.render, 'task-failed');
});

test('single reports made at once share statements, and each is answered and announced as it would be alone', async () => {
  const tasks = await Promise.all(Array.from({ length: 12 }, (_, i) => claimedTask(db.pool, `rr-together-${i}`)));
  const before = await reportsPerStatement.get();
  const count = (v: typeof before) => v.values.find((x) => x.metricName === 'tgs_reports_per_statement_count')?.value ?? 0;
  const sum = (v: typeof before) => v.values.find((x) => x.metricName === 'tgs_reports_per_statement_sum')?.value ?? 0;
  const noted: string[] = [];
  const announcer = { note: (id: string) => void noted.push(id) };
  const outcomes = ['completed', 'failed', 'exception'] as const;
  const settled = await Promise.allSettled([
    ...tasks.map((t, i) => resolveRun(db.pool, config, announcer, t.task_id, 0, outcomes[i % 3], i % 3 === 2 ? 'malformed-payload' : undefined)),
    // the same task twice at once: the second waits for a statement of its own and finds it done
    resolveRun(db.pool, config, announcer, tasks[0].task_id, 0, 'completed'),
    // a conflicting report of an already reported run, and a missing task, in the same burst
    resolveRun(db.pool, config, announcer, tasks[1].task_id, 0, 'completed'),
    resolveRun(db.pool, config, announcer, slugid.nice(), 0, 'completed'),
  ]);
  const after = await reportsPerStatement.get();
  assert.ok(count(after) - count(before) < sum(after) - sum(before), 'some statement took more than one report');

  for (const [i, t] of tasks.entries()) {
    const result = settled[i];
    assert.equal(result.status, 'fulfilled');
    const stored = (await loadTask(db.pool, t.task_id)) as TaskRow;
    const expected = structuredClone(t);
    resolveLatestRun(expected, outcomes[i % 3], i % 3 === 2 ? 'malformed-payload' : outcomes[i % 3], new Date(stored.runs[0].resolved as string));
    assert.deepEqual(stored, expected);
    assert.deepEqual((result as PromiseFulfilledResult<unknown>).value, taskStatus(expected));
    const resolutions = (await outboxRowsOf(db.pool, t.task_id)).filter((r) => r.render !== 'task-running' && r.render !== 'task-pending' && r.render !== 'task-defined');
    assert.equal(resolutions.length, 1, `one resolution message for task ${i}`);
    assert.deepEqual(outboxMessage(config, resolutions[0]), { ...resolutionMessage(config, expected, 0), cc: ['route.index.a', 'route.notify.b'] });
  }
  const [again, conflict, missing] = settled.slice(tasks.length);
  assert.deepEqual(again, settled[0], 'the same report again answers the same status');
  assert.ok(conflict.status === 'rejected' && conflict.reason instanceof TgsError && conflict.reason.code === 'RequestConflict');
  assert.ok(missing.status === 'rejected' && missing.reason instanceof TgsError && missing.reason.code === 'ResourceNotFound');
  assert.deepEqual(noted.sort(), tasks.map((t) => t.task_group_id).sort(), 'each written report noted its group once');
});

test('single reports written by one statement share one line per outcome, naming their runs and requests; a report the statement does not fit has a line of its own', async () => {
  const tasks: TaskRow[] = [];
  for (let i = 0; i < 5; i++) tasks.push(await claimedTask(db.pool, 'audit'));
  const lines: { fields: Record<string, unknown>; line: string }[] = [];
  const log = { info: (fields: object, line: string) => void lines.push({ fields: fields as Record<string, unknown>, line }) };
  // five reports in one turn: one statement (gatherTurn, nothing else in flight on this pool's batcher)
  await Promise.all(
    tasks.map((t, i) => resolveRun(db.pool, config, groups, t.task_id, 0, i < 3 ? 'completed' : 'exception', i < 3 ? undefined : 'malformed-payload', { log, reqId: `req${i}` })),
  );
  assert.deepEqual(
    lines.map((l) => l.line),
    ['tasks completed', 'tasks exception'],
    'one line per outcome of the statement, not one a task',
  );
  assert.deepEqual(lines[0].fields, {
    taskIds: tasks.slice(0, 3).map((t) => t.task_id),
    runIds: [0, 0, 0],
    taskGroupIds: tasks.slice(0, 3).map((t) => t.task_group_id),
    state: 'completed',
    reqIds: ['req0', 'req1', 'req2'],
  });
  assert.deepEqual(lines[1].fields, {
    taskIds: tasks.slice(3).map((t) => t.task_id),
    runIds: [0, 0],
    taskGroupIds: tasks.slice(3).map((t) => t.task_group_id),
    state: 'exception',
    reason: 'malformed-payload',
    reqIds: ['req3', 'req4'],
  });
  // the same report again is answered the read-check-write way, with its own line, as it was answered before
  lines.length = 0;
  await resolveRun(db.pool, config, groups, tasks[0].task_id, 0, 'completed', undefined, { log, reqId: 'again' });
  assert.deepEqual(lines.map((l) => [l.line, l.fields.taskIds, l.fields.reqIds]), [['tasks completed', [tasks[0].task_id], ['again']]]);
  // a refused report has no line
  lines.length = 0;
  await assert.rejects(resolveRun(db.pool, config, groups, tasks[1].task_id, 0, 'failed', undefined, { log, reqId: 'refused' }), /RequestConflict|not running/);
  assert.deepEqual(lines, []);
});
