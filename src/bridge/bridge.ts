import type pg from 'pg';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type { Config } from '../config.js';
import { prepared } from '../db/pool.js';
import { queueExchangeName } from '../exchanges/exchanges.js';
import { connectBus, type BusChannel as Channel, type BusConnection, type BusMessage as ConsumeMessage } from '../exchanges/bus.js';
import { SIGNALS, WORKFLOW_TYPE, workflowIdFor, type Resolution, type ResolvedState, type TaskGraphInput } from '../workflows/contract.js';

export interface BridgeOptions {
  config: Config;
  pool: pg.Pool;
  temporal: () => Promise<Client>;
  /** Durable queue shared by every bridge process (competing consumers). */
  queueName?: string;
  /** Flush a graph's batch after this long (ms) or at maxBatch messages, whichever comes first. */
  flushMs?: number;
  /**
   * Under load, at least this long (ms) between the starts of two flushes: a resolution arriving within it
   * of the previous flush waits for the rest of it, so bursts become one signal instead of many.
   */
  minFlushIntervalMs?: number;
  maxBatch?: number;
  log?: (line: string) => void;
}

export interface BridgeStats {
  received: number;
  signals: number;
  resolutionsForwarded: number;
  dropped: number;
  requeued: number;
}

interface Pending {
  msg: ConsumeMessage;
  kind: 'resolution' | 'defined';
  taskId: string;
  resolution?: Resolution;
}

const RESOLUTION_EXCHANGES: Record<string, ResolvedState> = {
  'task-completed': 'completed',
  'task-failed': 'failed',
  'task-exception': 'exception',
};

/** Parses a queue message into what the bridge forwards; undefined for messages it ignores. */
export function parseQueueMessage(exchangeSuffix: string, body: unknown): Omit<Pending, 'msg'> | undefined {
  const b = body as { status?: { taskId?: string; runs?: { state?: string; reasonResolved?: string }[] }; runId?: number };
  const taskId = b?.status?.taskId;
  if (typeof taskId !== 'string') return undefined;
  if (exchangeSuffix === 'task-defined') return { kind: 'defined', taskId };
  const state = RESOLUTION_EXCHANGES[exchangeSuffix];
  const runs = b.status?.runs ?? [];
  if (!state || typeof b.runId !== 'number') return undefined;
  // Only the latest run's resolution is final: an exception followed by the queue's own retry is not.
  if (b.runId !== runs.length - 1) return undefined;
  const reason = runs[b.runId]?.reasonResolved;
  return { kind: 'resolution', taskId, resolution: { taskId, runId: b.runId, state, ...(reason ? { reasonResolved: reason } : {}) } };
}

/**
 * AMQP → Temporal: consumes resolution (and task-defined) messages, batches them per graph, and
 * signals each graph's workflow once per flush. A message is acked only after its signal was accepted
 * (or its graph's workflow has ended), and requeued on any Temporal or Postgres error.
 */
export async function startBridge(options: BridgeOptions): Promise<{ stop(): Promise<void>; stats: BridgeStats }> {
  const { config, pool } = options;
  const log = options.log ?? ((line: string) => console.log(line));
  const queueName = options.queueName ?? 'tgs/scheduler-bridge';
  // 5 ms gathers the burst a completing fan-in produces without adding noticeable hop latency.
  const flushMs = options.flushMs ?? 5;
  const maxBatch = options.maxBatch ?? 500;
  // Each signal costs a workflow task: Temporal and the scheduler worker spent 1.3 ms of CPU per task of a
  // 10,000-task graph at ~3 resolutions a signal. 25 ms gathers ~8 at 300 tasks/s, and a chain's hops
  // (one resolution every ~35 ms) never wait for it.
  const minFlushIntervalMs = options.minFlushIntervalMs ?? 25;
  let lastFlushAt = 0;
  const stats: BridgeStats = { received: 0, signals: 0, resolutionsForwarded: 0, dropped: 0, requeued: 0 };
  const prefix = `${config.exchangePrefix}queue/v1/`;
  let stopped = false;
  let connection: BusConnection | undefined;
  let channel: Channel | undefined;
  let batch: Pending[] = [];
  let timer: NodeJS.Timeout | undefined;
  let flushing: Promise<void> | undefined;

  const signalGraph = async (client: Client, graphId: string, origin: string, items: Resolution[]) => {
    const workflowId = workflowIdFor(graphId);
    if (origin === 'queue') {
      await client.workflow.signalWithStart(WORKFLOW_TYPE, {
        workflowId,
        taskQueue: config.temporalTaskQueue,
        args: [{ taskGraphId: graphId, origin: 'queue' } satisfies TaskGraphInput],
        signal: SIGNALS.resolutions,
        signalArgs: [items],
      });
    } else {
      await client.workflow.getHandle(workflowId).signal(SIGNALS.resolutions, items);
    }
    stats.signals++;
    stats.resolutionsForwarded += items.length;
  };

  const flush = async (items: Pending[], ch: Channel) => {
    try {
      const client = await options.temporal();
      const resolutions = items.filter((p) => p.kind === 'resolution');
      const defined = items.filter((p) => p.kind === 'defined').map((p) => p.taskId);
      const work: Promise<void>[] = [];
      if (resolutions.length > 0) {
        // Every graph that has the task as a node hears it: its own graph and graphs depending on it.
        const { rows } = await pool.query<{ task_graph_id: string; task_id: string; origin: string }>(
          prepared(
            `SELECT n.task_graph_id, n.task_id, g.origin FROM graph_nodes n JOIN task_graphs g USING (task_graph_id)
             WHERE n.task_id = ANY($1) AND (g.state IN ('running', 'blocked') OR g.origin = 'queue')`,
            [[...new Set(resolutions.map((r) => r.taskId))]],
          ),
        );
        const byGraph = new Map<string, { origin: string; items: Resolution[] }>();
        for (const row of rows) {
          const entry = byGraph.get(row.task_graph_id) ?? { origin: row.origin, items: [] };
          byGraph.set(row.task_graph_id, entry);
          for (const r of resolutions) if (r.taskId === row.task_id) entry.items.push(r.resolution as Resolution);
        }
        for (const [graphId, entry] of byGraph) {
          work.push(
            signalGraph(client, graphId, entry.origin, entry.items).catch((err: unknown) => {
              // A graph whose workflow has ended (finished, canceled) waits for nothing: drop, never loop.
              if (err instanceof WorkflowNotFoundError) return;
              throw err;
            }),
          );
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
            [defined],
          ),
        );
        const byGroup = new Map<string, string[]>();
        for (const r of rows) byGroup.set(r.task_group_id, [...(byGroup.get(r.task_group_id) ?? []), r.task_id]);
        for (const [groupId, taskIds] of byGroup) {
          work.push(
            client.workflow
              .signalWithStart(WORKFLOW_TYPE, {
                workflowId: workflowIdFor(groupId),
                taskQueue: config.temporalTaskQueue,
                args: [{ taskGraphId: groupId, origin: 'queue' } satisfies TaskGraphInput],
                signal: SIGNALS.tasksDefined,
                signalArgs: [{ taskIds }],
              })
              .then(() => {
                stats.signals++;
              }),
          );
        }
      }
      await Promise.all(work);
      for (const p of items) ch.ack(p.msg);
    } catch (err) {
      log(`bridge: flush of ${items.length} message(s) failed, requeueing: ${(err as Error).message}`);
      stats.requeued += items.length;
      // Back off before requeueing so an unavailable Temporal does not become a hot redelivery loop.
      await new Promise((r) => setTimeout(r, 1000));
      try {
        for (const p of items) ch.nack(p.msg, false, true);
      } catch {
        // channel gone: the broker redelivers unacked messages anyway
      }
    }
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
      flushing = flush(items, ch).finally(() => {
        flushing = undefined;
        if (batch.length > 0) scheduleFlush(batch.length >= maxBatch);
      });
    }, immediate ? 0 : Math.max(flushMs, lastFlushAt + minFlushIntervalMs - Date.now()));
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

  const connect = async (): Promise<void> => {
    let attempt = 0;
    while (!stopped) {
      try {
        connection = await connectBus(config.amqpUrl);
        channel = await connection.createChannel();
        await channel.prefetch(2000);
        await channel.assertQueue(queueName, { durable: true });
        for (const ex of ['task-completed', 'task-failed', 'task-exception', 'task-defined'] as const) {
          const name = queueExchangeName(config.exchangePrefix, ex);
          await channel.assertExchange(name, 'topic', { durable: true });
          await channel.bindQueue(queueName, name, '#');
        }
        await channel.consume(queueName, onMessage, { noAck: false });
        connection.on('error', (err: Error) => log(`bridge: AMQP error: ${err.message}`));
        connection.on('close', () => {
          channel = undefined;
          connection = undefined;
          batch = [];
          if (!stopped) {
            log('bridge: AMQP connection closed; reconnecting');
            void connect();
          }
        });
        log(`bridge: consuming ${queueName}`);
        return;
      } catch (err) {
        attempt++;
        const delay = Math.min(200 * 2 ** attempt, 5000);
        log(`bridge: cannot reach RabbitMQ (${(err as Error).message}); retry ${attempt} in ${delay} ms`);
        await new Promise((r) => setTimeout(r, delay));
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
      await connection?.close().catch(() => undefined);
    },
  };
}
