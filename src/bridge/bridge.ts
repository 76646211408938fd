import type pg from 'pg';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Config } from '../config.js';
import { prepared } from '../db/pool.js';
import { queueExchangeName, tgsExchangeName } from '../exchanges/exchanges.js';
import { OutageLog } from '../outageLog.js';
import { connectBus, sendTogether, type BusChannel as Channel, type BusConnection, type BusMessage as ConsumeMessage } from '../exchanges/bus.js';
import { observeBridgeLag } from '../observability/metrics.js';
import { graphsHearing } from '../scheduler/graphStore.js';
import {
  resolutionsSignal,
  tasksDefinedSignal,
  WORKFLOW_TYPE,
  workflowIdFor,
  type Resolution,
  type ResolvedState,
  type TaskGraphInput,
} from '../workflows/contract.js';

export interface BridgeOptions {
  config: Config;
  pool: pg.Pool;
  temporal: () => Promise<Client>;
  /**
   * Durable queue shared by every bridge process of this deployment (competing consumers); default
   * `bridgeQueueName(config)`, so two deployments on one vhost never take each other's messages.
   */
  queueName?: string;
  /** Flush a graph's batch after this long (ms) or at maxBatch messages, whichever comes first. */
  flushMs?: number;
  /**
   * Under load, at least this long (ms) between the starts of two flushes: a resolution arriving within it
   * of the previous flush waits for the rest of it, so bursts become one signal instead of many.
   */
  minFlushIntervalMs?: number;
  /**
   * After a flush that carried LOADED_FLUSH messages or more (a busy graph, not a chain), the next starts at least
   * this long (ms) after it instead of minFlushIntervalMs.
   */
  loadedFlushIntervalMs?: number;
  maxBatch?: number;
  /** One line per event; lines about one graph name it in `fields.taskGraphId` (src/log.ts lineLogger). */
  log?: (line: string, fields?: { taskGraphId?: string }) => void;
}

export interface BridgeStats {
  received: number;
  signals: number;
  resolutionsForwarded: number;
  dropped: number;
  /** messages given back to the queue for a later attempt */
  requeued: number;
  /** signals Temporal refused (their graph's messages are requeued with backoff) */
  failedSignals: number;
  /** resolutions whose task's stored latest run disagrees with the message (forged or stale): ignored */
  disagreed: number;
  /** resolutions of tasks this deployment's database does not know */
  unknownTasks: number;
}

interface Pending {
  msg: ConsumeMessage;
  kind: 'resolution' | 'defined';
  taskId: string;
  resolution?: Resolution;
}

const DEPENDENT_DEFINED = tgsExchangeName('', 'dependent-task-defined');

const RESOLUTION_EXCHANGES: Record<string, ResolvedState> = {
  'task-completed': 'completed',
  'task-failed': 'failed',
  'task-exception': 'exception',
};

/**
 * The bridge queue of a deployment: named after its exchange prefix and scheduler id. Before, every bridge
 * consumed `tgs/scheduler-bridge`, so the bridges of two deployments on one vhost competed for one queue and
 * each acked the other's resolutions as unknown (docs/deployments.md: upgrading from that queue).
 */
export function bridgeQueueName(config: Pick<Config, 'exchangePrefix' | 'schedulerId'>): string {
  return `${config.exchangePrefix}tgs/scheduler-bridge/${config.schedulerId}`;
}

/** A flush of this many messages or more means the bridge is busy: the next waits loadedFlushIntervalMs. */
const LOADED_FLUSH = 8;

/**
 * Binding patterns of the bridge queue. Routing keys are `<taskId>.<runId>.<workerGroup>.<workerId>.
 * <provisionerId>.<workerType>.<schedulerId>.<taskGroupId>.<routing>`: with TGS_BRIDGE_SCHEDULER_IDS set,
 * one pattern per scheduler id; otherwise every message of this deployment's (prefixed) exchanges, which
 * queue-level dependencies between tasks of any scheduler id need.
 */
export function bridgeBindings(config: Pick<Config, 'bridgeSchedulerIds'>): string[] {
  if (config.bridgeSchedulerIds.length === 0) return ['#'];
  return config.bridgeSchedulerIds.map((id) => `*.*.*.*.*.*.${id}.#`);
}

/**
 * Parses a message of the bridge's queue into what the bridge forwards; undefined for messages it ignores.
 * `exchange` is the exchange's name without the deployment prefix. A `queue/v1/task-defined` message counts as
 * a dependent-task-defined notice: bridges before that notice existed bound task-defined, and what such a binding
 * queued before an upgrade is still served.
 */
export function parseQueueMessage(exchange: string, body: unknown): Omit<Pending, 'msg'> | undefined {
  if (exchange === DEPENDENT_DEFINED) {
    const taskId = (body as { taskId?: unknown } | null)?.taskId;
    return typeof taskId === 'string' ? { kind: 'defined', taskId } : undefined;
  }
  const b = body as { status?: { taskId?: string; runs?: { state?: string; reasonResolved?: string }[] }; runId?: number };
  const taskId = b?.status?.taskId;
  if (typeof taskId !== 'string') return undefined;
  if (exchange === 'queue/v1/task-defined') return { kind: 'defined', taskId };
  const state = exchange.startsWith('queue/v1/') ? RESOLUTION_EXCHANGES[exchange.slice('queue/v1/'.length)] : undefined;
  const runs = b.status?.runs ?? [];
  if (!state || typeof b.runId !== 'number') return undefined;
  // Only the latest run's resolution is final: an exception followed by the queue's own retry is not.
  if (b.runId !== runs.length - 1) return undefined;
  const reason = runs[b.runId]?.reasonResolved;
  return { kind: 'resolution', taskId, resolution: { taskId, runId: b.runId, state, ...(reason ? { reasonResolved: reason } : {}) } };
}

/**
 * AMQP → Temporal: consumes resolution (and dependent-task-defined) messages, batches them per graph, and signals
 * each graph's workflow once per flush. What a graph hears is the queue's stored state, not the message's
 * word: each resolution is checked against its task's row (latest run and its state) and dropped if the row
 * disagrees, so a message forged on the exchanges cannot resolve a task. A message is acked once every graph
 * it concerns accepted its signal (or has ended); only the messages of a graph whose signal failed are
 * requeued, after a backoff that grows with that graph's failures, so one graph cannot hold up the others.
 */
export async function startBridge(options: BridgeOptions): Promise<{ stop(): Promise<void>; stats: BridgeStats }> {
  const { config, pool } = options;
  const log = options.log ?? ((line: string) => console.log(line));
  const queueName = options.queueName ?? bridgeQueueName(config);
  // No wait of its own after a quiet spell: the relay writes each batch in one socket write, so messages published
  // together arrive in one read and are gathered by the timer's turn anyway. A 5 ms wait here was a third of a
  // chain's report → signal time (hop split p50 11-12 → 8 ms, hop p50 30.2-34.1 → 27.5-28.0 ms, alternated); under
  // load the intervals below gather the bursts.
  const flushMs = options.flushMs ?? 0;
  const maxBatch = options.maxBatch ?? 500;
  // Each signal costs a workflow task: Temporal and the scheduler worker spent 1.3 ms of CPU per task of a
  // 10,000-task graph at ~3 resolutions a signal. 25 ms gathers ~8 at 300 tasks/s, and a chain's hops
  // (one resolution every ~35 ms) never wait for it.
  const minFlushIntervalMs = options.minFlushIntervalMs ?? 25;
  // Under load, fewer and larger signals: 50 ms after a flush of 8 or more moved a 10,000-task graph's Temporal +
  // scheduler worker + bridge CPU from 0.59-0.60 to 0.43-0.44 ms a task, 100 ms to 0.35-0.36 (and the 100,000-task
  // graph from 144.5 to 125.3 s), while a chain (one resolution a flush) keeps the 25 ms and its hop latency.
  const loadedFlushIntervalMs = options.loadedFlushIntervalMs ?? 100;
  let lastFlushAt = 0;
  let lastFlushSize = 0;
  const stats: BridgeStats = { received: 0, signals: 0, resolutionsForwarded: 0, dropped: 0, requeued: 0, failedSignals: 0, disagreed: 0, unknownTasks: 0 };
  const prefix = config.exchangePrefix;
  let stopped = false;
  let connection: BusConnection | undefined;
  let channel: Channel | undefined;
  let batch: Pending[] = [];
  let timer: NodeJS.Timeout | undefined;
  let flushing: Promise<void> | undefined;
  const amqpOutage = new OutageLog(log, 'bridge: RabbitMQ');
  const flushOutage = new OutageLog(log, 'bridge: Postgres/Temporal');
  let flushFailures = 0;
  /** consecutive failed signals per graph (or group, for dependent-task-defined), for its backoff */
  const graphFailures = new Map<string, number>();
  const delayed = new Set<NodeJS.Timeout>();

  /** A line at most once a minute for a recurring condition, with how often it happened meanwhile. */
  const everyMinute = (render: (count: number, example: string) => string) => {
    let lastAt = 0;
    let count = 0;
    return (example: string) => {
      count++;
      if (Date.now() - lastAt < 60_000) return;
      lastAt = Date.now();
      log(render(count, example));
      count = 0;
    };
  };
  const warnUnknown = everyMinute(
    (n, taskId) =>
      `bridge: WARNING ${n} resolution(s) of tasks this deployment's database does not know (e.g. ${taskId}); the RabbitMQ vhost looks shared with another deployment on the same exchanges: give each deployment its own TGS_EXCHANGE_PREFIX or TGS_BRIDGE_SCHEDULER_IDS`,
  );
  const noteDisagreed = everyMinute(
    (n, taskId) => `bridge: ignored ${n} resolution message(s) the queue's stored runs do not confirm (e.g. task ${taskId}: forged, or overtaken by a rerun)`,
  );

  const settle = (ch: Channel, items: Iterable<Pending>) => {
    try {
      sendTogether(ch, () => {
        for (const p of items) ch.ack(p.msg);
      });
    } catch {
      // channel gone: the broker redelivers unacked messages anyway
    }
  };
  const requeueLater = (ch: Channel, items: Pending[], delayMs: number) => {
    stats.requeued += items.length;
    const t = setTimeout(() => {
      delayed.delete(t);
      try {
        for (const p of items) ch.nack(p.msg, false, true);
      } catch {
        // channel gone: the broker redelivered them when it closed
      }
    }, delayMs);
    delayed.add(t);
  };

  const signalGraph = async (client: Client, graphId: string, origin: string, items: Resolution[]) => {
    const workflowId = workflowIdFor(graphId);
    if (origin === 'queue') {
      await client.workflow.signalWithStart(WORKFLOW_TYPE, {
        workflowId,
        taskQueue: config.temporalTaskQueue,
        args: [{ taskGraphId: graphId, origin: 'queue' } satisfies TaskGraphInput],
        signal: resolutionsSignal,
        signalArgs: [items],
      });
    } else {
      await client.workflow.getHandle(workflowId).signal(resolutionsSignal, items);
    }
    stats.signals++;
    stats.resolutionsForwarded += items.length;
  };

  /**
   * Splits resolutions into those the tasks' stored rows confirm (rewritten from the row: latest runId, its
   * state and reason) and the rest. One query per flush, next to the graph lookup the flush makes anyway.
   */
  const confirmByStoredState = async (resolutions: Pending[]): Promise<{ confirmed: Pending[]; refused: Pending[] }> => {
    const { rows } = await pool.query<{ task_id: string; run_id: number; state: string | null; reason: string | null }>(
      prepared(
        `SELECT task_id, jsonb_array_length(runs) - 1 AS run_id, runs->-1->>'state' AS state, runs->-1->>'reasonResolved' AS reason
         FROM tasks WHERE task_id = ANY($1)`,
        [[...new Set(resolutions.map((p) => p.taskId))]],
      ),
    );
    const stored = new Map(rows.map((r) => [r.task_id, r]));
    const confirmed: Pending[] = [];
    const refused: Pending[] = [];
    for (const p of resolutions) {
      const claimed = p.resolution as Resolution;
      const row = stored.get(p.taskId);
      if (!row) {
        stats.unknownTasks++;
        warnUnknown(p.taskId);
        refused.push(p);
      } else if (row.run_id !== claimed.runId || row.state !== claimed.state) {
        stats.disagreed++;
        noteDisagreed(p.taskId);
        refused.push(p);
      } else {
        p.resolution = { taskId: p.taskId, runId: row.run_id, state: row.state as ResolvedState, ...(row.reason ? { reasonResolved: row.reason } : {}) };
        confirmed.push(p);
      }
    }
    return { confirmed, refused };
  };

  /** One signal of the flush: which graph (or group) it goes to and which messages it carries. */
  interface Job {
    key: string;
    msgs: Pending[];
    run: () => Promise<unknown>;
  }

  /** Reads what the flush needs from Postgres and returns one job per graph to signal. */
  const planJobs = async (client: Client, items: Pending[], ch: Channel): Promise<Job[]> => {
    const jobs: Job[] = [];
    const resolutions = items.filter((p) => p.kind === 'resolution');
    const defined = items.filter((p) => p.kind === 'defined');
    if (resolutions.length > 0) {
      const { confirmed, refused } = await confirmByStoredState(resolutions);
      settle(ch, refused);
      // Every graph that has the task as a node hears it: its own graph and graphs depending on it.
      const rows = await graphsHearing(pool, [...new Set(confirmed.map((r) => r.taskId))]);
      const byTask = new Map<string, Pending[]>();
      for (const p of confirmed) byTask.set(p.taskId, [...(byTask.get(p.taskId) ?? []), p]);
      const byGraph = new Map<string, { origin: string; msgs: Pending[] }>();
      for (const row of rows) {
        const entry = byGraph.get(row.task_graph_id) ?? { origin: row.origin, msgs: [] };
        byGraph.set(row.task_graph_id, entry);
        entry.msgs.push(...(byTask.get(row.task_id) ?? []));
      }
      for (const [graphId, entry] of byGraph) {
        jobs.push({
          key: graphId,
          msgs: entry.msgs,
          run: () =>
            signalGraph(client, graphId, entry.origin, entry.msgs.map((p) => p.resolution as Resolution)).catch((err: unknown) => {
              // A graph whose workflow has ended (finished, canceled, terminated) waits for nothing: drop, never loop.
              if (err instanceof WorkflowNotFoundError) return;
              throw err;
            }),
        });
      }
    }
    if (defined.length > 0) {
      // Queue-level dependencies: a task created with dependencies joins its group's workflow.
      const { rows } = await pool.query<{ task_id: string; task_group_id: string }>(
        prepared(
          `SELECT t.task_id, t.task_group_id FROM tasks t
           WHERE t.task_id = ANY($1)
             AND EXISTS (SELECT 1 FROM task_dependencies d WHERE d.dependent_task_id = t.task_id)
             AND NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.task_id = t.task_id AND n.member)`,
          [defined.map((p) => p.taskId)],
        ),
      );
      const byGroup = new Map<string, string[]>();
      for (const r of rows) byGroup.set(r.task_group_id, [...(byGroup.get(r.task_group_id) ?? []), r.task_id]);
      for (const [groupId, taskIds] of byGroup) {
        jobs.push({
          key: groupId,
          msgs: defined.filter((p) => taskIds.includes(p.taskId)),
          run: () =>
            client.workflow
              .signalWithStart(WORKFLOW_TYPE, {
                workflowId: workflowIdFor(groupId),
                taskQueue: config.temporalTaskQueue,
                args: [{ taskGraphId: groupId, origin: 'queue' } satisfies TaskGraphInput],
                signal: tasksDefinedSignal,
                signalArgs: [{ taskIds }],
              })
              .then(() => {
                stats.signals++;
              }),
        });
      }
    }
    return jobs;
  };

  const flush = async (items: Pending[], ch: Channel) => {
    let jobs: Job[];
    try {
      jobs = await planJobs(await options.temporal(), items, ch);
      flushFailures = 0;
      flushOutage.recovered();
    } catch (err) {
      // Postgres or the Temporal connection: nothing was forwarded; all of it comes back after a pause.
      flushFailures++;
      flushOutage.failed(err, `${items.length} message(s) requeued, retried with backoff`);
      requeueLater(ch, items, Math.min(250 * 2 ** flushFailures, 10_000));
      return;
    }
    const results = await Promise.allSettled(jobs.map((job) => job.run()));
    // A message goes back if any graph it concerns failed, after the longest backoff among them.
    const retryAfter = new Map<Pending, number>();
    results.forEach((result, k) => {
      const job = jobs[k];
      const failures = graphFailures.get(job.key) ?? 0;
      if (result.status === 'fulfilled') {
        if (failures > 0) log(`bridge: task-graph/${job.key} accepts signals again after ${failures} failure(s)`, { taskGraphId: job.key });
        graphFailures.delete(job.key);
        return;
      }
      graphFailures.set(job.key, failures + 1);
      stats.failedSignals++;
      if (failures === 0) {
        log(`bridge: signal to task-graph/${job.key} failed (${(result.reason as Error).message}); its messages are retried with backoff, other graphs go on`, { taskGraphId: job.key });
      }
      // 250 ms doubling to 30 s: a graph that fails for good costs one signal attempt every 30 s.
      const delay = Math.min(250 * 2 ** failures, 30_000);
      for (const p of job.msgs) retryAfter.set(p, Math.max(retryAfter.get(p) ?? 0, delay));
    });
    const accepted = items.filter((p) => !retryAfter.has(p));
    settle(ch, accepted);
    for (const p of accepted) observeBridgeLag(p.msg.properties);
    const byDelay = new Map<number, Pending[]>();
    for (const [p, delay] of retryAfter) byDelay.set(delay, [...(byDelay.get(delay) ?? []), p]);
    for (const [delay, msgs] of byDelay) requeueLater(ch, msgs, delay);
  };

  const scheduleFlush = (immediate: boolean) => {
    if (flushing) return;
    if (timer && !immediate) return;
    if (timer) clearTimeout(timer);
    timer = setTimeout(() => {
      timer = undefined;
      const items = batch;
      batch = [];
      const ch = channel;
      if (items.length === 0 || !ch) return;
      lastFlushAt = Date.now();
      lastFlushSize = items.length;
      flushing = flush(items, ch).finally(() => {
        flushing = undefined;
        if (batch.length > 0) scheduleFlush(batch.length >= maxBatch);
      });
    }, immediate ? 0 : Math.max(flushMs, lastFlushAt + (lastFlushSize >= LOADED_FLUSH ? loadedFlushIntervalMs : minFlushIntervalMs) - Date.now()));
  };

  const onMessage = (msg: ConsumeMessage | null) => {
    if (!msg || !channel) return;
    stats.received++;
    let parsed: Omit<Pending, 'msg'> | undefined;
    try {
      const suffix = msg.fields.exchange.startsWith(prefix) ? msg.fields.exchange.slice(prefix.length) : '';
      parsed = parseQueueMessage(suffix, JSON.parse(msg.content.toString('utf8')));
    } catch {
      parsed = undefined;
    }
    if (!parsed) {
      // Malformed, or a resolution of a run that is no longer the latest: nothing waits on it.
      stats.dropped++;
      channel.ack(msg);
      return;
    }
    batch.push({ msg, ...parsed });
    scheduleFlush(batch.length >= maxBatch);
  };

  /** The connection or its channel closed (broker restart, network, a channel error): start over. */
  const lost = (conn: BusConnection, err: Error | undefined) => {
    if (connection !== conn) return;
    connection = undefined;
    channel = undefined;
    // unacked messages go back to the queue when the channel closes
    batch = [];
    void conn.close().catch(() => undefined);
    if (stopped) return;
    amqpOutage.failed(err ?? new Error('connection closed'), 'reconnecting');
    void connect();
  };

  let consumingLogged = false;
  const connect = async (): Promise<void> => {
    let attempt = 0;
    while (!stopped) {
      let conn: BusConnection | undefined;
      try {
        conn = await connectBus(config.amqpUrl, { connectionName: 'tgs-bridge' });
        // 'close' follows every 'error'; the outage is logged once there
        conn.on('error', () => undefined);
        const ch = await conn.createChannel();
        ch.on('error', () => undefined);
        await ch.prefetch(2000);
        await ch.assertQueue(queueName, { durable: true });
        const bound = [
          ...(['task-completed', 'task-failed', 'task-exception'] as const).map((ex) => queueExchangeName(config.exchangePrefix, ex)),
          tgsExchangeName(config.exchangePrefix, 'dependent-task-defined'),
        ];
        for (const name of bound) {
          await ch.assertExchange(name, 'topic', { durable: true });
          for (const pattern of bridgeBindings(config)) await ch.bindQueue(queueName, name, pattern);
        }
        // Bridges before the dependent-task-defined notice bound every task-defined message; a kept binding would
        // still route a submitted graph's every task through this queue. Unbinding what is not bound is a no-op.
        const defined = queueExchangeName(config.exchangePrefix, 'task-defined');
        await ch.assertExchange(defined, 'topic', { durable: true });
        for (const pattern of bridgeBindings(config)) await ch.unbindQueue(queueName, defined, pattern);
        const current = conn;
        connection = current;
        channel = ch;
        current.on('close', (closeErr?: Error) => lost(current, closeErr));
        ch.on('close', () => lost(current, new Error('channel closed')));
        await ch.consume(queueName, onMessage, { noAck: false });
        amqpOutage.recovered(`consuming ${queueName} again`);
        if (!consumingLogged) log(`bridge: consuming ${queueName} (bindings ${bridgeBindings(config).join(', ')})`);
        consumingLogged = true;
        return;
      } catch (err) {
        if (conn && connection === conn) {
          connection = undefined;
          channel = undefined;
        }
        await conn?.close().catch(() => undefined);
        attempt++;
        amqpOutage.failed(err, 'reconnecting');
        await new Promise((r) => setTimeout(r, Math.min(200 * 2 ** attempt, 5000)));
      }
    }
  };
  await connect();

  return {
    stats,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      await flushing;
      for (const t of delayed) clearTimeout(t);
      await connection?.close().catch(() => undefined);
    },
  };
}
