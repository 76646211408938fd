import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startStack, eventually, type Stack } from '../../support/stack.js';
import { startFastWorker } from '../../support/fastWorker.js';
import { fastTask, graphOf } from '../../support/graphs.js';
import { outboxCount } from '../../support/db.js';
import { bridgeQueueName } from '../../src/bridge/bridge.js';
import { connectBus } from '../../src/exchanges/bus.js';
import * as cluster from '../../scripts/rabbitmqCluster.js';

// tgs on a three-node RabbitMQ cluster (scripts/rabbitmqCluster.ts, beside the machine's own node): AMQP_URL lists
// the three nodes, the bridge queue is a quorum queue; stopping the node the relay and the bridge are connected to,
// which leads the bridge queue, moves them to another node and the graph finishes with every task resolved once.
let stack: Stack;
let worker: ReturnType<typeof startFastWorker>;
let urls: string[];
const log: string[] = [];
const resolved = new Map<string, number>();

before(async () => {
  ({ urls } = await cluster.start({ say: (line) => console.log(`cluster: ${line}`) }));
  stack = await startStack({ configOverrides: { amqpUrl: urls.join(',') }, log: (line) => log.push(line) });
  worker = startFastWorker({
    rootUrl: stack.api.rootUrl,
    credentials: stack.api.root,
    provisionerId: 'tgs-test',
    workerType: 'fast',
    concurrency: 2,
    decide: (task) => {
      resolved.set(task.taskId, (resolved.get(task.taskId) ?? 0) + 1);
      return 'completed';
    },
  });
});

after(async () => {
  await worker?.stop();
  await stack?.stop();
  cluster.stop({ say: (line) => console.log(`cluster: ${line}`) });
});

const graphState = async (id: string) => (await stack.root.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${id}/status`)).status.state;

test("the bridge queue is a quorum queue led by the node it was declared on, and the relay's and the bridge's node goes away: both move on and the graph finishes", { timeout: 240_000 }, async () => {
  const queue = bridgeQueueName(stack.config);
  const first = cluster.clusterNodes()[0];
  assert.equal(cluster.leaderOf(queue), first.name, 'declared through the first node of AMQP_URL, which leads it');

  // a chain: each task's resolution must cross the relay (its graph-signal lane) → workflow for the next to start
  const labels = Array.from({ length: 16 }, (_, k) => `t${k}`);
  const graph = graphOf(Object.fromEntries(labels.map((label, k) => [label, { requires: k === 0 ? [] : [labels[k - 1]] }])));
  const taskGraphId = slugid.nice();
  await stack.root.request('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graph);
  await eventually(async () => resolved.size >= 5, 'five tasks of the chain done', 60_000);

  const receivedBefore = stack.bridge?.stats.received ?? 0;
  cluster.stopNode(first.name);
  try {
    await eventually(async () => (await graphState(taskGraphId)) === 'finished', 'the graph finished through the failover', 180_000);
    const leader = cluster.leaderOf(queue);
    assert.ok(leader && leader !== first.name, `a new leader (${leader})`);
    // resolutions reach graphs through the relay's graph-signal lane; the bridge's queue carries the notice of a task
    // created with dependencies (on a queue nobody claims from: the fast worker's count stays the chain's)
    const group = slugid.nice();
    const [independent, dependent] = [slugid.nice(), slugid.nice()];
    const parked = (extra: Record<string, unknown>) => ({ ...fastTask('notice'), workerType: 'nobody-home', taskGroupId: group, ...extra });
    await stack.root.request('queue', 'PUT', `/task/${independent}`, parked({}));
    await stack.root.request('queue', 'PUT', `/task/${dependent}`, parked({ dependencies: [independent] }));
    await eventually(async () => (stack.bridge?.stats.received ?? 0) > receivedBefore, 'the bridge consumed from the new leader', 60_000);
    assert.deepEqual([...resolved.values()].filter((n) => n !== 1), [], 'every task ran once');
    assert.equal(resolved.size, labels.length);
    await eventually(async () => (await outboxCount(stack.api.db.pool)) === 0, 'the outbox drained');
    console.log(`leader of ${queue}: ${first.name} → ${leader}`);
    const moves = log.filter((line) => line.includes(`moved from amqp://127.0.0.1:${first.port} to amqp://127.0.0.1:`));
    assert.equal(moves.filter((line) => line.startsWith('bridge: ')).length, 1, `the bridge logs its move once:\n${log.join('\n')}`);
    assert.equal(moves.filter((line) => line.startsWith('relay: ')).length, 1, `the relay logs its move once:\n${log.join('\n')}`);
    for (const line of moves) console.log(line);
    assert.ok(!log.some((line) => line.includes('guest:guest')), 'no password in the log');

    // the API's heartbeat tries the nodes in turn
    const health = await fetch(`${stack.api.rootUrl}/api/queue/v1/__heartbeat__`);
    assert.equal(health.status, 200, await health.text());
  } finally {
    cluster.startNode(first.name);
  }
});

test('a publisher on the cluster: 200 confirmed messages, the node it publishes through stopped half-way, all 200 in the quorum queue once', { timeout: 120_000 }, async () => {
  const queue = `rabbit-cluster-test-${slugid.nice()}`;
  const nodes = cluster.clusterNodes();
  const setup = await connectBus(urls.join(','));
  const ch = await setup.createChannel();
  await ch.assertQueue(queue, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
  await setup.close();
  // connect through the second node this time, publish 100, stop it, move on, publish the rest
  let conn = await connectBus(urls.join(','), { after: `amqp://127.0.0.1:${nodes[0].port}` });
  assert.equal(conn.node, `amqp://127.0.0.1:${nodes[1].port}`);
  const publish = async (from: number, to: number) => {
    const pub = await conn.createConfirmChannel();
    for (let k = from; k < to; k++) pub.publish('', queue, Buffer.from(String(k)), { messageId: String(k), persistent: true });
    await pub.waitForConfirms();
  };
  await publish(0, 100);
  const lost = new Promise<void>((resolve) => conn.on('close', () => resolve()));
  conn.on('error', () => undefined);
  cluster.stopNode(nodes[1].name);
  try {
    await lost;
    conn = await connectBus(urls.join(','), { after: `amqp://127.0.0.1:${nodes[1].port}` });
    assert.equal(conn.node, `amqp://127.0.0.1:${nodes[2].port}`, 'the node after the lost one');
    await publish(100, 200);
    const read = await conn.createChannel();
    const seen = new Set<string>();
    await read.consume(queue, (msg) => {
      if (msg) seen.add(msg.content.toString());
    }, { noAck: true });
    await eventually(async () => seen.size === 200, 'all 200 messages read back', 30_000);
    await read.deleteQueue(queue);
    await conn.close();
  } finally {
    cluster.startNode(nodes[1].name);
  }
});

test('a crash (SIGKILL) of the node the relay and the bridge are on: they move on, and a graph finishes', { timeout: 240_000 }, async () => {
  // where the bridge is now: the node its latest move reached (the tests above moved it)
  const lastMove = log.filter((line) => line.startsWith('bridge: ') && line.includes('moved from')).at(-1) ?? '';
  const port = Number(/moved from \S+ to amqp:\/\/127\.0\.0\.1:(\d+)/.exec(lastMove)?.[1]);
  const victim = cluster.clusterNodes().find((n) => n.port === port);
  assert.ok(victim, `the bridge's node, from: ${lastMove}`);
  const movesBefore = log.filter((line) => line.includes('moved from')).length;

  const labels = Array.from({ length: 12 }, (_, k) => `k${k}`);
  const graph = graphOf(Object.fromEntries(labels.map((label, k) => [label, { requires: k === 0 ? [] : [labels[k - 1]] }])));
  const taskGraphId = slugid.nice();
  const before = resolved.size;
  await stack.root.request('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graph);
  await eventually(async () => resolved.size >= before + 4, 'four tasks of the chain done', 60_000);
  cluster.killNode(victim.name);
  try {
    await eventually(async () => (await graphState(taskGraphId)) === 'finished', 'the graph finished through the crash', 180_000);
    assert.equal(resolved.size, before + labels.length);
    assert.deepEqual([...resolved.values()].filter((n) => n !== 1), [], 'every task ran once');
    const moves = log.filter((line) => line.includes('moved from')).slice(movesBefore);
    for (const line of moves) console.log(line);
    assert.ok(moves.some((line) => line.startsWith('bridge: ') && line.includes(`moved from amqp://127.0.0.1:${port}`)), log.join('\n'));
    assert.ok(moves.some((line) => line.startsWith('relay: ') && line.includes(`moved from amqp://127.0.0.1:${port}`)), log.join('\n'));
  } finally {
    cluster.startNode(victim.name);
  }
});
