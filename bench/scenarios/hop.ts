import slugid from 'slugid';
import { NativeConnection, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { eventually } from '../../support/stack.js';
import { startFastWorker } from '../../support/fastWorker.js';
import { fastTask, graphOf } from '../../support/graphs.js';
import { bundlerOptions } from '../../src/temporal/workflowBundle.js';
import { createFloorActivities } from '../floor/activities.js';
import { percentile } from '../stats.js';
import { connectBus } from '../../src/exchanges/bus.js';
import { queueExchangeName } from '../../src/exchanges/exchanges.js';
import type { BenchStack, Sizes } from '../scenario.js';

/** The wall clock to the microsecond (Date.now() has whole ms): the hop's parts are a few ms each. */
const wallNow = () => performance.timeOrigin + performance.now();

/** Per-hop time: reportCompleted answered for A → B claimed, over a chain of tasks. */
async function chain(stack: BenchStack, sizes: Sizes) {
  // when each run was claimed and reported, on the wall clock (wallNow): the hop, and its split at the moments other
  // processes recorded (the relay's publish, Temporal's signal, the run's `scheduled`)
  const claimedWall = new Map<string, number>();
  const reportedWall = new Map<string, number>();
  // A consumer of task-completed, on a classic queue of its own: when the relay published each message (its
  // timestamp_in_ms header) and when RabbitMQ delivered it, to split report → signal further. Since the relay's
  // graph-signal lane signals the graph beside the publish, a signal may come before the delivery (delivered →
  // signal below 0).
  const publishedWall = new Map<string, number>();
  const deliveredWall = new Map<string, number>();
  const observer = await connectBus(stack.config.amqpUrl, { connectionName: 'bench-hop-observer' });
  observer.on('error', () => undefined);
  const observing = await observer.createChannel();
  const { queue } = await observing.assertQueue('', { exclusive: true, autoDelete: true });
  await observing.bindQueue(queue, queueExchangeName(stack.config.exchangePrefix, 'task-completed'), '#');
  await observing.consume(queue, (msg) => {
    if (!msg) return;
    const taskId = (JSON.parse(msg.content.toString()) as { status: { taskId: string } }).status.taskId;
    deliveredWall.set(taskId, wallNow());
    const published = msg.properties.headers?.timestamp_in_ms;
    if (typeof published === 'number') publishedWall.set(taskId, published);
  }, { noAck: true });
  const worker = startFastWorker({
    rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'chain', concurrency: 2,
    onClaim: (t) => {
      claimedWall.set(t.taskId, wallNow());
    },
    onReport: (t) => {
      reportedWall.set(t.taskId, wallNow());
    },
  });
  const labels = Array.from({ length: sizes.chain }, (_, i) => `c${i}`);
  const graph = graphOf(Object.fromEntries(labels.map((l, i) => [l, { requires: i ? [labels[i - 1]] : [] }])), 'bench');
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = 'chain';
  const id = slugid.nice();
  const res = await stack.root.request('scheduler', 'PUT', `/task-graph/${id}`, graph);
  const ids = new Map<string, string>(res.tasks.map((t: { label: string; taskId: string }) => [t.label, t.taskId]));
  await eventually(async () => (await stack.root.request('scheduler', 'GET', `/task-graph/${id}/status`)).status.state === 'finished', 'chain finished', 600_000);
  await worker.stop();
  await observer.close();
  const hops: number[] = [];
  for (let i = 1; i < labels.length; i++) {
    hops.push((claimedWall.get(ids.get(labels[i]) as string) as number) - (reportedWall.get(ids.get(labels[i - 1]) as string) as number));
  }
  // Where a hop's time goes: report → signal recorded (outbox, the relay's read and its graph-signal lane) and
  // signal → next claimed (workflow task, dispatch local activity, NOTIFY, claim).
  const signaledAt = await resolutionSignalTimes(stack, id);
  // when the dispatch activity made each task pending (its run's `scheduled`, written in that transaction)
  const pendingAt = new Map<string, number>();
  for (const taskId of ids.values()) {
    const { status } = await stack.root.request('queue', 'GET', `/task/${taskId}/status`);
    const scheduled = status.runs?.[0]?.scheduled;
    if (scheduled) pendingAt.set(taskId, Date.parse(scheduled));
  }
  const toSignal: number[] = [];
  const fromSignal: number[] = [];
  const toPending: number[] = [];
  const pendingToClaim: number[] = [];
  const toPublished: number[] = [];
  const publishedToDelivered: number[] = [];
  const deliveredToSignal: number[] = [];
  for (let i = 1; i < labels.length; i++) {
    const a = ids.get(labels[i - 1]) as string;
    const b = ids.get(labels[i]) as string;
    const published = publishedWall.get(a);
    const delivered = deliveredWall.get(a);
    if (published !== undefined && delivered !== undefined) {
      toPublished.push(published - (reportedWall.get(a) as number));
      publishedToDelivered.push(delivered - published);
    }
    const signal = signaledAt.get(a);
    if (signal === undefined) continue;
    if (delivered !== undefined) deliveredToSignal.push(signal - delivered);
    toSignal.push(signal - (reportedWall.get(a) as number));
    fromSignal.push((claimedWall.get(b) as number) - signal);
    const pending = pendingAt.get(b);
    if (pending === undefined) continue;
    toPending.push(pending - signal);
    pendingToClaim.push((claimedWall.get(b) as number) - pending);
  }
  return { hops, toSignal, fromSignal, toPending, pendingToClaim, toPublished, publishedToDelivered, deliveredToSignal };
}

/** When Temporal recorded each task's first resolutions signal, from the graph's workflow histories. */
async function resolutionSignalTimes(stack: BenchStack, taskGraphId: string): Promise<Map<string, number>> {
  const times = new Map<string, number>();
  const workflowId = `task-graph/${taskGraphId}`;
  for await (const execution of stack.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    const history = await stack.client.workflow.getHandle(workflowId, execution.runId).fetchHistory();
    for (const event of history.events ?? []) {
      const attrs = event.workflowExecutionSignaledEventAttributes;
      if (!attrs || attrs.signalName !== 'resolutions' || !event.eventTime) continue;
      const at = Number(event.eventTime.seconds) * 1000 + (event.eventTime.nanos ?? 0) / 1e6;
      const payload = attrs.input?.payloads?.[0]?.data;
      if (!payload) continue;
      for (const r of JSON.parse(Buffer.from(payload).toString()) as { taskId: string }[]) {
        if (!times.has(r.taskId)) times.set(r.taskId, at);
      }
    }
  }
  return times;
}

/** The same hop done bare: signal → workflow → one activity → one Postgres UPDATE. */
async function temporalFloor(stack: BenchStack, sizes: Sizes, mode: 'regular' | 'local') {
  const pool = stack.api.db.pool;
  await pool.query('CREATE TABLE IF NOT EXISTS bench_floor (id int PRIMARY KEY, n int)');
  await pool.query('INSERT INTO bench_floor VALUES (1, 0) ON CONFLICT DO NOTHING');
  const waiters = new Map<number, () => void>();
  const connection = await NativeConnection.connect({ address: stack.temporal.address });
  const worker = await Worker.create({
    connection,
    taskQueue: `bench-floor-${mode}`,
    workflowBundle: await bundleWorkflowCode({ workflowsPath: new URL('../floor/workflows.ts', import.meta.url).pathname, webpackConfigHook: bundlerOptions?.webpackConfigHook }),
    activities: createFloorActivities(pool, (n) => waiters.get(n)?.()),
  });
  const running = worker.run();
  const handle = await stack.client.workflow.start('floorWorkflow', { taskQueue: `bench-floor-${mode}`, workflowId: `floor-${mode}-${slugid.nice()}`, args: [mode, sizes.floorHops] });
  const times: number[] = [];
  for (let n = 1; n <= sizes.floorHops; n++) {
    const done = new Promise<void>((resolve) => waiters.set(n, resolve));
    const t0 = performance.now();
    await handle.signal('hop', n);
    await done;
    times.push(performance.now() - t0);
  }
  await handle.result();
  worker.shutdown();
  await running;
  await connection.close();
  return times;
}

/** The queue's own floor: scheduleTask → claimed, for a task that was unscheduled. */
async function queueFloor(stack: BenchStack, sizes: Sizes) {
  const claimedAt = new Map<string, number>();
  const worker = startFastWorker({
    rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'qfloor', concurrency: 2,
    onClaim: (t) => claimedAt.set(t.taskId, performance.now()),
  });
  // A blocker nobody claims keeps the measured tasks unscheduled until we schedule them by hand.
  const blocker = slugid.nice();
  await stack.root.request('queue', 'PUT', `/task/${blocker}`, { ...fastTask('blocker'), workerType: 'nobody' });
  const times: number[] = [];
  for (let i = 0; i < Math.min(sizes.floorHops, 100); i++) {
    const id = slugid.nice();
    await stack.root.request('queue', 'PUT', `/task/${id}`, { ...fastTask(`q${i}`), workerType: 'qfloor', dependencies: [blocker] });
    const t0 = performance.now();
    await stack.root.request('queue', 'POST', `/task/${id}/schedule`);
    await eventually(async () => claimedAt.has(id), 'claimed', 10_000);
    times.push((claimedAt.get(id) as number) - t0);
  }
  await worker.stop();
  return times;
}

/**
 * The hop of a cache hit (docs/formats.md § Cached tasks) against a normal hop, both ready → the dependent
 * scheduled, from the runs' own times (written in the transactions that made them, ms resolution). A chain of
 * cached nodes runs twice: the first time every node misses and runs (a normal hop: a run's `resolved` → the next
 * run's `scheduled`), the second time every node is a hit (a hit's run is resolved in the dispatch that would have
 * scheduled it, so a hop is one `resolved` → the next).
 */
async function cachedChain(stack: BenchStack, sizes: Sizes) {
  const worker = startFastWorker({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'chain-cache', concurrency: 2 });
  const labels = Array.from({ length: sizes.chain }, (_, i) => `c${i}`);
  const runChain = async () => {
    const graph = graphOf(Object.fromEntries(labels.map((l, i) => [l, { requires: i ? [labels[i - 1]] : [] }])), 'bench');
    for (const [label, node] of Object.entries(graph.tasks)) {
      (node.task as { workerType: string }).workerType = 'chain-cache';
      (node as { cache?: unknown }).cache = { name: `bench-${label}` };
    }
    const id = slugid.nice();
    const res = await stack.root.request('scheduler', 'PUT', `/task-graph/${id}`, graph);
    const ids = new Map<string, string>(res.tasks.map((t: { label: string; taskId: string }) => [t.label, t.taskId]));
    await eventually(async () => (await stack.root.request('scheduler', 'GET', `/task-graph/${id}/status`)).status.state === 'finished', 'cached chain finished', 600_000);
    const runs: { scheduled: number; resolved: number; cached: boolean }[] = [];
    for (const label of labels) {
      const run = (await stack.root.request('queue', 'GET', `/task/${ids.get(label)}/status`)).status.runs[0];
      runs.push({ scheduled: Date.parse(run.scheduled), resolved: Date.parse(run.resolved), cached: run.cachedFrom !== undefined });
    }
    return runs;
  };
  const first = await runChain();
  // every completion indexed before the second chain looks them up: the last node's entry is written last
  await eventually(async () => (await stack.root.request('scheduler', 'GET', `/cache/default/bench-${labels.at(-1)}`)).entries.length > 0, 'cache entries written', 60_000);
  const second = await runChain();
  await worker.stop();
  const miss: number[] = [];
  const hit: number[] = [];
  for (let i = 1; i < labels.length; i++) {
    miss.push(first[i].scheduled - first[i - 1].resolved);
    hit.push(second[i].resolved - second[i - 1].resolved);
  }
  return { miss, hit, hits: second.filter((r) => r.cached).length };
}

/** Hop latency over a chain of tasks, against the bare Temporal floor (regular and local activity) and the queue's floor. */
export async function run(stack: BenchStack, sizes: Sizes) {
  stack.log(`hop: chain of ${sizes.chain}`);
  const { hops, toSignal, fromSignal, toPending, pendingToClaim, toPublished, publishedToDelivered, deliveredToSignal } = await chain(stack, sizes);
  stack.log('hop: floor (bare signal → activity → UPDATE)');
  const floor = await temporalFloor(stack, sizes, 'regular');
  const floorLocal = await temporalFloor(stack, sizes, 'local');
  stack.log('hop: queue floor (scheduleTask → claimed)');
  const qf = await queueFloor(stack, sizes);
  stack.log(`hop: a chain of ${sizes.chain} cached nodes, run twice (misses, then hits)`);
  const cached = await cachedChain(stack, sizes);
  if (cached.hits !== sizes.chain) throw new Error(`the second cached chain reused ${cached.hits} of ${sizes.chain} nodes`);
  return {
    p50_ms: percentile(hops, 50), p95_ms: percentile(hops, 95), p99_ms: percentile(hops, 99),
    floor_p50_ms: percentile(floor, 50), floor_p99_ms: percentile(floor, 99),
    floor_local_p50_ms: percentile(floorLocal, 50), floor_local_p99_ms: percentile(floorLocal, 99),
    queue_floor_p50_ms: percentile(qf, 50), queue_floor_p99_ms: percentile(qf, 99),
    // the hop split at the resolutions signal (wall clock; same machine)
    report_to_signal_p50_ms: percentile(toSignal, 50), signal_to_claim_p50_ms: percentile(fromSignal, 50),
    // report → signal split where the relay published (outbox, NOTIFY, the relay's read) and where RabbitMQ delivered
    // the message to a classic queue beside the bridge's (the bridge's own queue is quorum by default)
    report_to_published_p50_ms: percentile(toPublished, 50), published_to_delivered_p50_ms: percentile(publishedToDelivered, 50),
    delivered_to_signal_p50_ms: percentile(deliveredToSignal, 50),
    // signal → claimed split at the moment the dispatch activity made the task pending (ms resolution)
    signal_to_pending_p50_ms: percentile(toPending, 50), pending_to_claim_p50_ms: percentile(pendingToClaim, 50),
    // ready → the dependent scheduled: a normal hop (completed → next pending) and a cache hit's (resolved → next resolved)
    cache_miss_hop_p50_ms: percentile(cached.miss, 50), cache_hit_hop_p50_ms: percentile(cached.hit, 50), cache_hit_hop_p99_ms: percentile(cached.hit, 99),
  };
}
