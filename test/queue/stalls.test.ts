import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { registry } from '../../src/observability/metrics.js';

/*
 * task-stalled: a pending task waiting past TGS_STALL_AFTER_MS (here 1.5 s) on a queue with no workers is announced
 * exactly once per run and blocker, and counted in tgs_stalled_tasks; a queue whose worker is busy never stalls.
 * claimWork long-polls 1 s here, so a queue without a claimWork for 3 s has no workers.
 */
let t: TestApi;
before(async () => {
  t = await startTestApi({ stallAfterMs: 1500, claimWorkWaitMs: 1000, sweepIntervalMs: 100 });
});
after(async () => {
  await t?.close();
});

/** The task-stalled messages in the outbox (no relay runs here: they stay), by taskId. */
async function stalledMessages(): Promise<{ taskId: string; runId: number; kind: string; routingKey: string }[]> {
  const { rows } = await t.db.pool.query<{ routing_key: string; payload: { status: { taskId: string }; runId: number; blocker: { kind: string } } }>(
    `SELECT routing_key, payload FROM outbox WHERE exchange = $1 ORDER BY id`,
    [`${t.config.exchangePrefix}tgs/v1/task-stalled`],
  );
  return rows.map((r) => ({ taskId: r.payload.status.taskId, runId: r.payload.runId, kind: r.payload.blocker.kind, routingKey: r.routing_key }));
}

async function stalledGauge(taskQueueId: string): Promise<number> {
  const metric = await registry.getSingleMetric('tgs_stalled_tasks')!.get();
  return metric.values.filter((v) => v.labels.taskQueueId === taskQueueId).reduce((n, v) => n + v.value, 0);
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

test('a task waiting on a queue nobody claims from is announced once, counted, and cleared when a worker comes', async () => {
  const taskId = slugid.nice();
  assert.equal((await t.request('PUT', `/api/queue/v1/task/${taskId}`, { ...fastTask('lonely'), workerType: 'stall-none' })).status, 200);
  await sleep(1000);
  assert.deepEqual((await stalledMessages()).filter((m) => m.taskId === taskId), [], 'not before TGS_STALL_AFTER_MS');
  await sleep(2500);
  const mine = (await stalledMessages()).filter((m) => m.taskId === taskId);
  assert.equal(mine.length, 1, JSON.stringify(mine));
  assert.equal(mine[0].kind, 'no-workers');
  assert.equal(mine[0].runId, 0);
  // Taskcluster's routing key: alerts bind per queue
  assert.match(mine[0].routingKey, new RegExp(`^${taskId}\\.0\\._\\._\\.tgs-test\\.stall-none\\.`));
  assert.equal(await stalledGauge('tgs-test/stall-none'), 1);
  // many sweeps later, still once
  await sleep(1500);
  assert.equal((await stalledMessages()).filter((m) => m.taskId === taskId).length, 1);
  // a worker comes (claims something else first, then the task): the stall is over
  const claim = await t.request('POST', '/api/queue/v1/claim-work/tgs-test/stall-none', { workerGroup: 'g', workerId: 'w', tasks: 1 });
  assert.equal(claim.body.tasks[0].status.taskId, taskId);
  await sleep(800);
  assert.equal(await stalledGauge('tgs-test/stall-none'), 0);
});

test('a queue whose only worker is busy with a long task does not stall its pending tasks', async () => {
  const first = slugid.nice();
  const second = slugid.nice();
  for (const id of [first, second]) assert.equal((await t.request('PUT', `/api/queue/v1/task/${id}`, { ...fastTask('busy'), workerType: 'stall-busy' })).status, 200);
  // the worker takes one, and holds it (no more claimWork calls), well past the no-workers window and the threshold
  const claim = await t.request('POST', '/api/queue/v1/claim-work/tgs-test/stall-busy', { workerGroup: 'g', workerId: 'busy', tasks: 1 });
  assert.equal(claim.body.tasks.length, 1);
  await sleep(3500);
  const waiting = claim.body.tasks[0].status.taskId === first ? second : first;
  assert.deepEqual((await stalledMessages()).filter((m) => m.taskId === waiting), []);
  assert.equal(await stalledGauge('tgs-test/stall-busy'), 0);
  const why = await t.request('GET', `/api/queue/v1/task/${waiting}/explain`);
  assert.deepEqual(why.body.blockers.map((b: { kind: string }) => b.kind), ['workers-busy']);
});
