import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase, insertPendingTasks, type TestDatabase } from '../../support/db.js';
import { createPool } from '../../src/db/pool.js';
import { readOutbox } from '../../src/relay/outboxStore.js';
import { deleteSignalled, readLeftSignals } from '../../src/relay/graphSignalStore.js';

// What the relay's read records for the graph-signal lane (src/relay/graphSignalStore.ts RECORD_SIGNALS_SQL), on a
// real database: the rows are written here as the queue and the scheduler write them.
let db: TestDatabase;
let relayPool: ReturnType<typeof createPool>;
before(async () => {
  db = await createTestDatabase();
  // the relay's own session options (generic plans, index scans only), as startRelay makes its pool
  relayPool = createPool(db.url, 1, { genericPlans: true, indexScansOnly: true });
});
after(async () => {
  await relayPool.end();
  await db.drop();
});

/** Sets a task's runs (and its state, the latest run's). */
async function setRuns(taskId: string, runs: { state: string; reasonResolved?: string }[]) {
  await db.pool.query(`UPDATE tasks SET runs = $2::jsonb, state = $3 WHERE task_id = $1`, [taskId, JSON.stringify(runs), runs[runs.length - 1].state]);
}
async function graph(id: string, taskIds: string[], options: { state?: string; origin?: string } = {}) {
  await db.pool.query(`INSERT INTO task_graphs (task_graph_id, scheduler_id, state, origin) VALUES ($1, 's', $2, $3)`, [id, options.state ?? 'running', options.origin ?? 'graph']);
  for (const [i, taskId] of taskIds.entries()) {
    await db.pool.query(`INSERT INTO graph_nodes (task_graph_id, idx, task_id, member, label) VALUES ($1, $2, $3, true, $4)`, [id, i, taskId, `n${i}`]);
  }
}
/** An outbox row as resolveTask writes it (rendered from the row) or as enqueueMessages writes a whole message. */
async function resolutionRow(taskId: string, runId: unknown, state: string, options: { rendered?: boolean } = {}) {
  const messageId = `${taskId}/${String(runId)}/task-${state}`;
  if (options.rendered === false) {
    await db.pool.query(`INSERT INTO outbox (message_id, exchange, routing_key, payload) VALUES ($1, $2, 'k', $3)`, [
      messageId,
      `prefix/queue/v1/task-${state}`,
      JSON.stringify({ status: { taskId }, runId }),
    ]);
  } else {
    await db.pool.query(`INSERT INTO outbox (message_id, exchange, routing_key, payload, render) VALUES ($1, '', '', $2, $3)`, [
      messageId,
      JSON.stringify({ row: { task_id: taskId }, runId }),
      `task-${state}`,
    ]);
  }
  return messageId;
}
const byKey = (a: { task_graph_id: string; message_id: string }, b: typeof a) => `${a.task_graph_id} ${a.message_id}`.localeCompare(`${b.task_graph_id} ${b.message_id}`);
const recorded = async () =>
  (await db.pool.query<{ task_graph_id: string; message_id: string; origin: string; resolution: unknown }>('SELECT task_graph_id, message_id, origin, resolution FROM graph_signals')).rows.sort(byKey);

test("a read records each resolution the stored run confirms, once for every graph that hears it, from the row's word", async () => {
  const [done, failed, overtaken, contradicted, malformed, lone] = await insertPendingTasks(db.pool, 6, 'lane');
  await setRuns(done, [{ state: 'completed' }]);
  await setRuns(failed, [{ state: 'exception', reasonResolved: 'worker-shutdown' }, { state: 'failed', reasonResolved: 'failed' }]);
  await setRuns(overtaken, [{ state: 'completed' }, { state: 'pending' }]);
  await setRuns(contradicted, [{ state: 'completed' }]);
  await setRuns(malformed, [{ state: 'completed' }]);
  await setRuns(lone, [{ state: 'completed' }]);
  await graph('G-own', [done, failed, overtaken, contradicted, malformed]);
  await graph('G-dependent', [done]);
  await graph('G-finished', [done], { state: 'finished' });
  await graph('G-queue-finished', [done], { state: 'finished', origin: 'queue' });
  const m = {
    done: await resolutionRow(done, 0, 'completed'),
    failed: await resolutionRow(failed, 1, 'failed', { rendered: false }),
    failedFirst: await resolutionRow(failed, 0, 'exception'),
    overtaken: await resolutionRow(overtaken, 0, 'completed'),
    contradicted: await resolutionRow(contradicted, 0, 'failed'),
    malformed: await resolutionRow(malformed, 'zero', 'completed'),
    lone: await resolutionRow(lone, 0, 'completed'),
  };
  await db.pool.query(`INSERT INTO outbox (message_id, exchange, routing_key, payload, render) VALUES ('x', '', '', '"not an object"', 'task-completed')`);

  const first = await readOutbox(relayPool, { full: true }, true);
  assert.equal(first.batch.length, 8, 'every outbox row is read as before');
  const expected = [
    { task_graph_id: 'G-dependent', message_id: m.done, origin: 'graph', resolution: { taskId: done, runId: 0, state: 'completed' } },
    { task_graph_id: 'G-own', message_id: m.done, origin: 'graph', resolution: { taskId: done, runId: 0, state: 'completed' } },
    { task_graph_id: 'G-own', message_id: m.failed, origin: 'graph', resolution: { taskId: failed, runId: 1, state: 'failed', reasonResolved: 'failed' } },
    { task_graph_id: 'G-queue-finished', message_id: m.done, origin: 'queue', resolution: { taskId: done, runId: 0, state: 'completed' } },
  ];
  assert.deepEqual(first.heard.map(({ recorded_at: _, ...row }) => row).sort(byKey), expected.sort(byKey), 'the overtaken, contradicted, malformed and graphless are not');
  assert.ok(first.heard.every((r) => Math.abs(r.recorded_at - Date.now()) < 60_000), 'recorded_at is epoch ms');
  // the keys in the order a signal's payload has always had them (a workflow's history is read as text)
  assert.deepEqual(first.heard.map((r) => Object.keys(r.resolution)).sort(), [
    ['taskId', 'runId', 'state'],
    ['taskId', 'runId', 'state'],
    ['taskId', 'runId', 'state'],
    ['taskId', 'runId', 'state', 'reasonResolved'],
  ]);
  assert.deepEqual(await recorded(), expected.sort(byKey));
  assert.ok(first.nextXid > 0n && first.xmin > 0n && first.lastTaken >= 8, 'the cursor header is still read');

  // Read again (a batch that failed is read again): nothing new is returned or recorded.
  const again = await readOutbox(relayPool, { full: true }, true);
  assert.deepEqual(again.heard, []);
  assert.equal((await recorded()).length, 4);
  // A relay without the lane records nothing.
  await db.pool.query('DELETE FROM graph_signals');
  assert.deepEqual((await readOutbox(relayPool, { full: true }, false)).heard, []);
  assert.deepEqual(await recorded(), []);

  // What a relay left is read back, and deleted once accepted.
  await readOutbox(relayPool, { full: true }, true);
  const left = await readLeftSignals(relayPool);
  assert.deepEqual(left.map(({ recorded_at: _, ...row }) => row).sort(byKey), expected);
  await deleteSignalled(relayPool, left.filter((r) => r.task_graph_id === 'G-own'));
  assert.deepEqual((await recorded()).map((r) => r.task_graph_id), ['G-dependent', 'G-queue-finished']);
});
