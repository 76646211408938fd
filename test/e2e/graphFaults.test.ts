import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import amqp from 'amqplib';
import { eventually } from '../../support/stack.js';
import { graphOf } from '../../support/graphs.js';
import { createTaskGraph } from '../../src/scheduler/createTaskGraph.js';
import { bridgeQueueName } from '../../src/bridge/bridge.js';
import { queueExchangeName, taskRoutingKey } from '../../src/exchanges/exchanges.js';
import { useStack } from '../helpers/stackFixture.js';

// Small on purpose: the node limit is tested at the limit, and every other graph here stays under it.
const MAX_NODES = 3;
const log: string[] = [];
const stack = useStack({ configOverrides: { maxGraphNodes: MAX_NODES }, log: (line) => log.push(line), worker: true });

/** A graph whose tasks nobody claims unless the test does (worker type `manual`). */
function manualGraph(nodes: Parameters<typeof graphOf>[0]) {
  const graph = graphOf(nodes);
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = 'manual';
  return graph;
}

async function put(graph: unknown) {
  const id = slugid.nice();
  const res = await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${id}`, graph);
  return { id, res, taskId: (label: string) => (res.body.tasks as { label: string; taskId: string }[]).find((t) => t.label === label)?.taskId as string };
}
const taskState = async (taskId: string) => (await stack.api.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status.state as string;
const graphState = async (id: string) => (await stack.api.request('GET', `/api/scheduler/v1/task-graph/${id}/status`)).body.status.state as string;

/**
 * Binds (or unbinds) the bridge's queue to task-completed as bridges before the graph-signal lane did: what such a
 * binding queued before an upgrade is still checked by the bridge against the stored run.
 */
async function earlierBridgeBinding(bind: boolean) {
  const conn = await amqp.connect(stack.config.amqpUrl);
  const ch = await conn.createChannel();
  const args = [bridgeQueueName(stack.config), queueExchangeName(stack.config.exchangePrefix, 'task-completed'), '#'] as const;
  await (bind ? ch.bindQueue(...args) : ch.unbindQueue(...args));
  await conn.close();
}

/** Publishes on the queue's own exchange what anyone with publish rights on the vhost could. */
async function publishResolution(taskId: string, taskGroupId: string, runs: { state: string }[], runId: number) {
  const conn = await amqp.connect(stack.config.amqpUrl);
  const ch = await conn.createConfirmChannel();
  const key = taskRoutingKey({ taskId, runId, provisionerId: 'tgs-test', workerType: 'manual', schedulerId: stack.config.schedulerId, taskGroupId });
  ch.publish(queueExchangeName(stack.config.exchangePrefix, 'task-completed'), key, Buffer.from(JSON.stringify({ status: { taskId, runs }, runId })), {
    messageId: slugid.nice(),
  });
  await ch.waitForConfirms();
  await conn.close();
}

test('a forged task-completed for a pending or running task resolves nothing: its dependents stay unscheduled', async () => {
  const { id, taskId } = await put(manualGraph({ pendingOne: {}, runningOne: {}, afterPending: { requires: ['pendingOne'] }, }));
  await eventually(async () => (await taskState(taskId('pendingOne'))) === 'pending', 'roots pending');
  const claim = await stack.api.request('POST', '/api/queue/v1/claim-work/tgs-test/manual', { tasks: 1, workerGroup: 'g', workerId: 'w' });
  const claimed = claim.body.tasks[0].status.taskId as string;
  const unclaimed = claimed === taskId('pendingOne') ? taskId('runningOne') : taskId('pendingOne');
  // Graphs hear resolutions from Postgres (the relay's graph-signal lane): a forged message reaches no queue of tgs.
  const received = stack.bridge?.stats.received ?? 0;
  await publishResolution(claimed, id, [{ state: 'completed' }], 0);
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(stack.bridge?.stats.received, received, 'the bridge queue is not bound to the resolution exchanges');
  const lane = await stack.api.db.pool.query('SELECT 1 FROM graph_signals WHERE task_graph_id = $1', [id]);
  assert.equal(lane.rowCount, 0, 'nothing recorded for the graph');
  // What an earlier bridge's binding queued is still checked against the stored run.
  await earlierBridgeBinding(true);
  const before = stack.bridge?.stats.disagreed ?? 0;
  const signalsBefore = stack.bridge?.stats.signals ?? 0;
  await publishResolution(claimed, id, [{ state: 'completed' }], 0);
  await publishResolution(unclaimed, id, [{ state: 'completed' }], 0);
  await eventually(async () => (stack.bridge?.stats.disagreed ?? 0) >= before + 2, 'the bridge weighed both forged messages');
  // Give a forwarded resolution time to reach the workflow and its dispatch (tens of ms here).
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(await taskState(taskId('afterPending')), 'unscheduled', 'the dependent stays unscheduled');
  // the graphs hearing a task are read with its run's state: a refused resolution's graph gets no (empty) signal either
  assert.equal(stack.bridge?.stats.signals, signalsBefore, 'the flushes of forged resolutions signalled no graph');
  const status = (await stack.api.request('GET', `/api/scheduler/v1/task-graph/${id}/status`)).body.status;
  assert.equal(status.state, 'running');
  // The real resolution still goes through.
  const pendingOne = taskId('pendingOne');
  if (claimed !== pendingOne) {
    await stack.api.request('POST', '/api/queue/v1/task/' + claimed + '/runs/0/completed');
    const again = await stack.api.request('POST', '/api/queue/v1/claim-work/tgs-test/manual', { tasks: 1, workerGroup: 'g', workerId: 'w' });
    assert.equal(again.body.tasks[0].status.taskId, pendingOne);
  }
  await stack.api.request('POST', `/api/queue/v1/task/${pendingOne}/runs/0/completed`);
  await eventually(async () => (await taskState(taskId('afterPending'))) === 'pending', 'the dependent scheduled after the real completion');
});

test('resolutions of tasks the database does not know (queued by an earlier binding) are logged as a shared vhost, once per interval', async () => {
  await earlierBridgeBinding(true);
  const before = stack.bridge?.stats.unknownTasks ?? 0;
  for (let i = 0; i < 3; i++) await publishResolution(slugid.nice(), slugid.nice(), [{ state: 'completed' }], 0);
  await eventually(async () => (stack.bridge?.stats.unknownTasks ?? 0) >= before + 3, 'the bridge saw the unknown tasks');
  assert.equal(log.filter((l) => l.includes('looks shared')).length, 1);
  // each refused message acked once: a second ack of a delivery would have closed the bridge's channel
  assert.deepEqual(log.filter((l) => l.startsWith('bridge:') && l.includes('channel closed')), []);
  await earlierBridgeBinding(false);
});

test('a graph committed without its workflow (Temporal down, or the API killed after the commit) is started by the sweep and finishes', async () => {
  const id = slugid.nice();
  // What the API's PUT does up to its commit, and no further.
  await createTaskGraph({ config: stack.config, pool: stack.api.db.pool }, id, graphOf({ a: {}, b: { requires: ['a'] } }));
  const started = async () => (await stack.api.db.pool.query('SELECT workflow_started FROM task_graphs WHERE task_graph_id = $1', [id])).rows[0].workflow_started as boolean;
  assert.equal(await started(), false);
  await eventually(async () => (await graphState(id)) === 'finished', 'graph started by the sweep and finished', 30_000);
  assert.equal(await started(), true);
});

test('graphs and extends past TGS_MAX_GRAPH_NODES are refused with a 400 before anything is written', async () => {
  const nodes = (n: number) => Object.fromEntries(Array.from({ length: n }, (_, i) => [`t${i}`, {}]));
  const counts = async () =>
    (await stack.api.db.pool.query<{ graphs: number; tasks: number; nodes: number }>(
      'SELECT (SELECT count(*)::int FROM task_graphs) AS graphs, (SELECT count(*)::int FROM tasks) AS tasks, (SELECT count(*)::int FROM graph_nodes) AS nodes',
    )).rows[0];
  const before = await counts();
  const over = await put(manualGraph(nodes(MAX_NODES + 1)));
  assert.equal(over.res.status, 400);
  assert.equal(over.res.body.code, 'InputValidationError');
  assert.match(over.res.body.message, /at most 3 \(TGS_MAX_GRAPH_NODES\)/);
  assert.deepEqual(await counts(), before, 'nothing written');

  const at = await put(manualGraph(nodes(MAX_NODES)));
  assert.equal(at.res.status, 200, 'a graph of exactly the limit is accepted');
  const afterCreate = await counts();
  const extend = await stack.api.request('POST', `/api/scheduler/v1/task-graph/${at.id}/extend`, { tasks: manualGraph({ more: {} }).tasks });
  assert.equal(extend.status, 400);
  assert.equal(extend.body.code, 'InputValidationError');
  assert.match(extend.body.message, /4 nodes \(3 existing \+ 1 new\)/);
  assert.deepEqual(await counts(), afterCreate, 'the extend wrote nothing');
});

test('a graph and its nodes expire with its tasks', async () => {
  const now = Date.now();
  const graph = graphOf({ a: {}, b: { requires: ['a'] } });
  for (const node of Object.values(graph.tasks)) {
    Object.assign(node.task, { deadline: new Date(now + 3000).toISOString(), expires: new Date(now + 4000).toISOString() });
  }
  const { id } = await put(graph);
  const rows = async () =>
    (await stack.api.db.pool.query<{ graphs: number; nodes: number }>(
      'SELECT (SELECT count(*)::int FROM task_graphs WHERE task_graph_id = $1) AS graphs, (SELECT count(*)::int FROM graph_nodes WHERE task_graph_id = $1) AS nodes',
      [id],
    )).rows[0];
  assert.deepEqual(await rows(), { graphs: 1, nodes: 2 });
  await eventually(async () => {
    const r = await rows();
    return r.graphs === 0 && r.nodes === 0;
  }, 'graph rows deleted by the expiry sweep', 30_000);
  assert.equal((await stack.api.request('GET', `/api/scheduler/v1/task-graph/${id}/status`)).status, 404);
});

test('Postgres LISTEN sessions killed (claim waiter, relay lock): both reconnect, say so once each way, and a graph finishes', async () => {
  log.length = 0;
  const { rows } = await stack.api.db.pool.query<{ pid: number }>(
    `SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND query LIKE 'LISTEN %'
     UNION SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())`,
  );
  assert.ok(rows.length >= 2, 'the claim waiter and the relay lock session found');
  for (const { pid } of rows) await stack.api.db.pool.query('SELECT pg_terminate_backend($1)', [pid]);
  await eventually(async () => log.some((l) => l.includes('claimWork LISTEN session (Postgres) back')), 'claim waiter listening again', 10_000);
  await eventually(async () => stack.relay?.stats.active === true, 'relay active again', 10_000);
  const { id } = await put(graphOf({ a: {}, b: { requires: ['a'] }, c: { requires: ['b'] } }));
  await eventually(async () => (await graphState(id)) === 'finished', 'graph finished after the kill', 30_000);
  const lines = (text: string) => log.filter((l) => l.includes(text)).length;
  assert.equal(lines('claimWork LISTEN session (Postgres) unavailable'), 1, log.join('\n'));
  assert.equal(lines('claimWork LISTEN session (Postgres) back'), 1, log.join('\n'));
  assert.equal(lines('lost the relay lock session'), 1, log.join('\n'));
  assert.equal(lines('active (holds the relay lock)'), 1, log.join('\n'));
});
