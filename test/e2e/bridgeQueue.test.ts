import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { eventually } from '../../support/stack.js';
import { fastTask, graphOf } from '../../support/graphs.js';
import { outboxCount } from '../../support/db.js';
import { bridgeQueueName, parseQueueMessage, startBridge } from '../../src/bridge/bridge.js';
import { bridgeQueueArguments } from '../../src/bridge/bridgeQueue.js';
import { connectBus, type BusChannel, type BusConnection } from '../../src/exchanges/bus.js';
import { queueExchangeName } from '../../src/exchanges/exchanges.js';
import { WORKFLOW_TYPE, workflowIdFor } from '../../src/workflows/contract.js';
import { useStack } from '../helpers/stackFixture.js';

// What reaches the bridge's queue: the dependent-task-defined notice of a task created with dependencies, never the
// task-defined messages of a submitted graph's tasks (its workflow holds them already), nor resolutions (graphs hear
// them from the relay's graph-signal lane, src/relay/graphSignalLane.ts).
const stack = useStack({ inProcessBridge: false });
let connection: BusConnection;
let channel: BusChannel;

stack.onStart(async () => {
  connection = await connectBus(stack.config.amqpUrl);
  channel = await connection.createChannel();
});
stack.onStop(async () => {
  await connection.close();
});

const outboxEmpty = () =>
  eventually(async () => (await outboxCount(stack.api.db.pool)) === 0, 'the relay published everything');
// declared with the bridge's own arguments: RabbitMQ refuses a quorum queue's declaration without its x-queue-type
const queued = async () => (await channel.assertQueue(bridgeQueueName(stack.config), { durable: true, arguments: bridgeQueueArguments(stack.config) })).messageCount;
const manualTask = (extra: Record<string, unknown> = {}) => ({ ...fastTask('bridge queue'), workerType: 'manual', ...extra });

test("the bridge unbinds task-defined and the resolutions; a graph's tasks and resolutions never reach its queue, a createTask with dependencies does once", async () => {
  const bridgeOptions = { config: stack.config, pool: stack.api.db.pool, temporal: async () => stack.client, log: () => undefined };
  const queueName = bridgeQueueName(stack.config);
  // Bridges of earlier versions bound every task-defined message and the resolutions to the queue; a bridge starting
  // unbinds them.
  await channel.assertQueue(queueName, { durable: true, arguments: bridgeQueueArguments(stack.config) });
  for (const exchange of ['task-defined', 'task-completed', 'task-failed', 'task-exception'] as const) {
    await channel.bindQueue(queueName, queueExchangeName(stack.config.exchangePrefix, exchange), '#');
  }
  await (await startBridge(bridgeOptions)).stop();

  const graphId = slugid.nice();
  const graph = graphOf({ a: {}, b: { requires: ['a'] }, c: { requires: ['a'] } });
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = 'manual';
  const submitted = await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${graphId}`, graph);
  assert.equal(submitted.status, 200);
  const rootId = (submitted.body.tasks as { label: string; taskId: string }[]).find((t) => t.label === 'a')?.taskId as string;
  await eventually(async () => (await stack.api.request('GET', `/api/queue/v1/task/${rootId}/status`)).body.status.state === 'pending', 'root pending');
  await outboxEmpty();
  assert.equal(await queued(), 0, "none of the graph's three task-defined messages is in the bridge's queue");
  const claim = await stack.api.request('POST', '/api/queue/v1/claim-work/tgs-test/manual', { tasks: 1, workerGroup: 'g', workerId: 'w' });
  assert.equal(claim.body.tasks[0].status.taskId, rootId);
  assert.equal((await stack.api.request('POST', `/api/queue/v1/task/${rootId}/runs/0/completed`)).status, 200);
  await outboxEmpty();
  assert.equal(await queued(), 0, "the root's task-completed is not in the bridge's queue");

  // Queue-level: a task without dependencies needs no workflow; one with dependencies has its group's workflow take it in.
  const group = slugid.nice();
  const independent = slugid.nice();
  const dependent = slugid.nice();
  assert.equal((await stack.api.request('PUT', `/api/queue/v1/task/${independent}`, manualTask({ taskGroupId: group }))).status, 200);
  assert.equal((await stack.api.request('PUT', `/api/queue/v1/task/${dependent}`, manualTask({ taskGroupId: group, dependencies: [independent] }))).status, 200);
  await outboxEmpty();
  assert.equal(await queued(), 1, 'one dependent-task-defined notice, for the task with dependencies');

  const bridge = await startBridge(bridgeOptions);
  try {
    await eventually(async () => (await queued()) === 0 && bridge.stats.signals === 1, 'the notice forwarded');
    const description = await stack.client.workflow.getHandle(workflowIdFor(group)).describe();
    assert.equal(description.type, WORKFLOW_TYPE, "the group's workflow was started for it");
  } finally {
    await bridge.stop();
  }
});

test('parseQueueMessage: the notice, a task-defined message queued by an earlier binding, resolutions and junk', () => {
  assert.deepEqual(parseQueueMessage('tgs/v1/dependent-task-defined', { version: 1, taskId: 'T', taskGroupId: 'G' }), { kind: 'defined', taskId: 'T' });
  assert.equal(parseQueueMessage('tgs/v1/dependent-task-defined', { version: 1, taskId: 7 }), undefined);
  assert.equal(parseQueueMessage('tgs/v1/dependent-task-defined', null), undefined);
  assert.deepEqual(parseQueueMessage('queue/v1/task-defined', { status: { taskId: 'T', runs: [] } }), { kind: 'defined', taskId: 'T' });
  const completed = { status: { taskId: 'T', runs: [{ state: 'completed' }] }, runId: 0 };
  assert.deepEqual(parseQueueMessage('queue/v1/task-completed', completed), {
    kind: 'resolution',
    taskId: 'T',
    resolution: { taskId: 'T', runId: 0, state: 'completed' },
  });
  assert.equal(parseQueueMessage('queue/v1/task-pending', completed), undefined, 'not an exchange the bridge forwards');
  assert.equal(parseQueueMessage('scheduler/v1/task-completed', completed), undefined, 'a resolution exchange only under queue/v1/');
});
