import client from 'prom-client';
import { withinTime } from '../withinTime.js';
import type pg from 'pg';
import { logger } from '../log.js';
import { isPendingSql } from '../db/taskPredicates.js';
import { DEAD_LETTER_COUNT, UNPUBLISHED_COUNT } from '../exchanges/outbox.js';

/**
 * Every tgs metric, in one registry per process: `tgs dev` runs API, relay, bridge and scheduler worker in
 * one process, so one scrape of its metrics port shows all of them. docs/operations.md describes each one.
 * Hot paths only call `observe` on a histogram (or a child resolved once); anything that needs Postgres is
 * collected at scrape time.
 */
export const registry = new client.Registry();
client.collectDefaultMetrics({ register: registry });

/** Latency buckets (seconds) from 1 ms to 2 minutes: requests, hops and lags are ms normally, minutes when stuck. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120];
/** Waits (seconds): a claimWork long-poll lasts up to 20 s; a task may stay pending for hours. */
const WAIT_BUCKETS = [0.005, 0.025, 0.1, 0.5, 1, 2.5, 5, 10, 20, 30, 60, 300, 900, 3600, 4 * 3600];

export const httpDuration = new client.Histogram({
  name: 'tgs_http_request_duration_seconds',
  help: 'API requests: time from arrival to the response, by service, Taskcluster method name and status code',
  labelNames: ['service', 'method', 'status'] as const,
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

export const claimWorkWait = new client.Histogram({
  name: 'tgs_claim_work_wait_seconds',
  help: 'claimWork calls: how long the long-poll waited before answering; result is claimed (tasks returned) or empty',
  labelNames: ['result'] as const,
  buckets: WAIT_BUCKETS,
  registers: [registry],
});
const claimWorkClaimed = claimWorkWait.labels('claimed');
const claimWorkEmpty = claimWorkWait.labels('empty');

export const taskPendingWait = new client.Histogram({
  name: 'tgs_task_pending_seconds',
  help: 'Claimed runs: how long the run was pending (scheduled → claimed)',
  buckets: WAIT_BUCKETS,
  registers: [registry],
});

export const graphHop = new client.Histogram({
  name: 'tgs_graph_hop_seconds',
  help: "Graph tasks that became pending: the latest resolution of the task's requirements → the task pending (the schedule activity's commit)",
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

export const bridgeLag = new client.Histogram({
  name: 'tgs_bridge_lag_seconds',
  help: 'Bridge: the relay publishing a message → its signal accepted by Temporal (the message acked)',
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

export const graphSignalLag = new client.Histogram({
  name: 'tgs_graph_signal_lag_seconds',
  help: "Graph-signal lane: the relay's read recording a resolution for a graph → that graph's signal accepted by Temporal",
  buckets: LATENCY_BUCKETS,
  registers: [registry],
});

/** The relay's graph-signal lane had a signal accepted for a resolution it recorded at `recordedAtMs` (epoch ms). */
export function observeGraphSignalLag(recordedAtMs: number, now = Date.now()): void {
  if (recordedAtMs > 0) graphSignalLag.observe(Math.max(0, now - recordedAtMs) / 1000);
}

export const reportsPerStatement = new client.Histogram({
  name: 'tgs_reports_per_statement',
  help: 'Single reports (reportCompleted/Failed/Exception) resolved by one statement: more than one when reports arrive while one is in flight',
  buckets: [1, 2, 4, 8, 16, 32, 64],
  registers: [registry],
});

/** A claimWork call answered after `seconds`; `claimed` tasks (0: it answered empty). */
export function observeClaimWork(seconds: number, claimed: number): void {
  (claimed > 0 ? claimWorkClaimed : claimWorkEmpty).observe(seconds);
}

/**
 * The bridge acked a message whose signal Temporal accepted. The relay stamps messages with
 * `timestamp_in_ms` (RabbitMQ's own message-timestamp header name; the AMQP `timestamp` property has
 * whole seconds only); messages without it (published by something else) are not measured.
 */
export function observeBridgeLag(properties: { headers?: Record<string, unknown> }, now = Date.now()): void {
  const published = properties.headers?.timestamp_in_ms;
  if (typeof published === 'number' && published > 0) bridgeLag.observe(Math.max(0, now - published) / 1000);
}

// ---- collected at scrape time ----

/** A scrape must answer even when Postgres does not: a query slower than this leaves its gauge out. */
const COLLECT_TIMEOUT_MS = 2000;

async function timed<T>(what: string, query: Promise<T>): Promise<T | undefined> {
  try {
    return await withinTime(query, COLLECT_TIMEOUT_MS, `timed out after ${COLLECT_TIMEOUT_MS} ms`);
  } catch (err) {
    logger('metrics').warn({ err: (err as Error).message }, `metrics: cannot collect ${what}`);
    return undefined;
  }
}

/** Pools whose database is observed, by database URL (two APIs of one process on one database count once). */
const queuePools = new Map<string, pg.Pool>();
const outboxPools = new Map<string, pg.Pool>();

new client.Gauge({
  name: 'tgs_queue_pending_tasks',
  help: 'Pending tasks (waiting to be claimed) by worker pool; read from Postgres at scrape time',
  labelNames: ['provisionerId', 'workerType'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const pool of queuePools.values()) {
      // An index-only count over tasks_pending (a partial index on tgs_task_pending(state)): it reads pending tasks only.
      const result = await timed('pending tasks', pool.query<{ provisioner_id: string; worker_type: string; n: string }>(
        `SELECT provisioner_id, worker_type, count(*) AS n FROM tasks WHERE ${isPendingSql()} GROUP BY provisioner_id, worker_type`,
      ));
      for (const row of result?.rows ?? []) this.inc({ provisionerId: row.provisioner_id, workerType: row.worker_type }, Number(row.n));
    }
  },
});

new client.Gauge({
  name: 'tgs_stalled_tasks',
  help: 'Pending tasks announced as stalled (waiting past TGS_STALL_AFTER_MS on a queue with no workers) by task queue; read from Postgres at scrape time',
  labelNames: ['taskQueueId', 'kind'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const pool of queuePools.values()) {
      const result = await timed('stalled tasks', pool.query<{ task_queue_id: string; kind: string; n: string }>(
        'SELECT task_queue_id, kind, count(*) AS n FROM task_stalls GROUP BY 1, 2',
      ));
      for (const row of result?.rows ?? []) this.inc({ taskQueueId: row.task_queue_id, kind: row.kind }, Number(row.n));
    }
  },
});

new client.Gauge({
  name: 'tgs_task_graphs',
  help: 'Task graphs by state (running, blocked, finished, canceled); read from Postgres at scrape time',
  labelNames: ['state'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const pool of queuePools.values()) {
      // task_graphs_state (state, created) serves it without touching the rows.
      const result = await timed('task graphs', pool.query<{ state: string; n: string }>(`SELECT state, count(*) AS n FROM task_graphs GROUP BY state`));
      for (const row of result?.rows ?? []) this.inc({ state: row.state }, Number(row.n));
    }
  },
});

/**
 * The outbox's size and oldest row, and the number of its dead letters, read once for the three gauges of a scrape
 * (prom-client collects gauges concurrently): a read younger than a second is reused.
 */
interface OutboxReading { n: number; oldest: number; dead: number }
let outboxRead: { at: number; value: Promise<OutboxReading | undefined> } | undefined;
function readOutbox(): Promise<OutboxReading | undefined> {
  if (outboxRead && Date.now() - outboxRead.at < 1000) return outboxRead.value;
  const value = (async () => {
    let result: OutboxReading | undefined;
    for (const pool of outboxPools.values()) {
      // The oldest row by primary key (one index probe), the count by a scan of the backlog only; the dead letters
      // are few (each one logged and alerted on) until an operator replays or deletes them.
      const read = await timed('the outbox', pool.query<{ n: string; oldest: number | null; dead: string }>(
        `SELECT ${UNPUBLISHED_COUNT} AS n,
                GREATEST((SELECT extract(epoch FROM now() - created)::float8 FROM outbox ORDER BY id LIMIT 1),
                         (SELECT extract(epoch FROM now() - created)::float8 FROM outbox_deferred ORDER BY id LIMIT 1)) AS oldest,
                ${DEAD_LETTER_COUNT} AS dead`,
      ));
      if (!read) continue;
      const row = read.rows[0];
      result = { n: (result?.n ?? 0) + Number(row.n), oldest: Math.max(result?.oldest ?? 0, row.oldest ?? 0), dead: (result?.dead ?? 0) + Number(row.dead) };
    }
    return result;
  })();
  outboxRead = { at: Date.now(), value };
  return value;
}
new client.Gauge({
  name: 'tgs_outbox_messages',
  help: 'Messages in the Postgres outbox and its deferred lane not yet published by the relay; read at scrape time by the relay',
  registers: [registry],
  async collect() {
    this.reset();
    const read = await readOutbox();
    if (read) this.set(read.n);
  },
});
new client.Gauge({
  name: 'tgs_outbox_oldest_age_seconds',
  help: 'Age of the oldest message in the outbox (0 when empty): a growing value means the relay is not publishing',
  registers: [registry],
  async collect() {
    this.reset();
    const read = await readOutbox();
    if (read) this.set(Math.max(0, read.oldest));
  },
});
new client.Gauge({
  name: 'tgs_outbox_dead_letters',
  help: 'Messages the relay set aside because they can never be published (outbox_dead_letters, migration 028); read at scrape time by the relay',
  registers: [registry],
  async collect() {
    this.reset();
    const read = await readOutbox();
    if (read) this.set(read.dead);
  },
});

export const workerStreamsOpen = new client.Gauge({
  name: 'tgs_worker_streams',
  help: 'Worker streams open on this API process (docs/api.md § The worker stream)',
  registers: [registry],
});

/**
 * Counters a component keeps in a plain stats object (the relay's and the bridge's): read at scrape
 * time, so the component itself needs no metrics code. Sums over every registered object.
 */
function statsCounter<S extends object>(name: string, help: string, sources: Set<S>, read: (s: S) => number): void {
  new client.Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      let total = 0;
      for (const s of sources) total += read(s);
      this.set(total);
    },
  });
}

interface RelayStatsView { published: number; reconnects: number; active: boolean; deadLettered: number; signals?: number; failedSignals?: number; signalsWaiting?: number }
interface HookListenerStatsView { messages: number; created: number; requeued: number }
interface BridgeStatsView { received: number; signals: number; resolutionsForwarded: number; dropped: number; requeued: number; deadLettered?: number }
const relays = new Set<RelayStatsView>();
const bridges = new Set<BridgeStatsView>();
const hookListeners = new Set<HookListenerStatsView>();
// Gauges holding running totals (prom-client's Counter cannot be set from a snapshot); `rate()` works on them
// as on counters because they only grow during a process's life.
statsCounter('tgs_relay_published_messages_total', 'Messages the relay published and RabbitMQ confirmed', relays, (s) => s.published);
statsCounter('tgs_relay_reconnects_total', 'Failed RabbitMQ connection attempts of the relay', relays, (s) => s.reconnects);
statsCounter('tgs_relay_dead_lettered_messages_total', 'Outbox rows the relay moved to outbox_dead_letters because their message can never be published', relays, (s) => s.deadLettered);
statsCounter('tgs_relay_graph_signals_total', "Signals the relay's graph-signal lane had accepted by graph workflows (or found ended)", relays, (s) => s.signals ?? 0);
statsCounter('tgs_relay_graph_signal_failures_total', "Signals of the relay's graph-signal lane that Temporal refused (that graph's resolutions are sent again with backoff)", relays, (s) => s.failedSignals ?? 0);
statsCounter('tgs_relay_graph_signals_waiting', 'Resolutions the active relay recorded for graphs and has not had accepted yet', relays, (s) => s.signalsWaiting ?? 0);
statsCounter('tgs_relay_active', '1 when this process holds the relay lock and publishes (one relay at a time)', relays, (s) => (s.active ? 1 : 0));
statsCounter('tgs_bridge_received_messages_total', 'Messages the bridge received', bridges, (s) => s.received);
statsCounter('tgs_bridge_signals_total', 'Signals the bridge sent to graph workflows', bridges, (s) => s.signals);
statsCounter('tgs_bridge_resolutions_forwarded_total', 'Task resolutions the bridge forwarded to graph workflows', bridges, (s) => s.resolutionsForwarded);
statsCounter('tgs_bridge_requeued_messages_total', 'Messages requeued after a failed flush (Temporal unavailable)', bridges, (s) => s.requeued);
statsCounter('tgs_hook_listener_messages_total', "Messages the hook listener received (hooks' bindings, src/hooks/listener.ts)", hookListeners, (s) => s.messages);
statsCounter('tgs_hook_listener_fires_total', 'Hook fires the hook listener created from messages (a message seen again fires nothing)', hookListeners, (s) => s.created);
statsCounter('tgs_hook_listener_requeued_messages_total', "Messages the hook listener put back on its queue because their fires failed (retried, the delay doubling up to 10 s)", hookListeners, (s) => s.requeued);
// Every bridge of a deployment reads the same queue's depth: the highest reading, not their sum.
new client.Gauge({
  name: 'tgs_bridge_dead_letter_messages',
  help: "Messages in the bridge's dead-letter queue (delivered more often than the quorum queue's delivery limit), as a bridge last read it",
  registers: [registry],
  collect() {
    let depth = -1;
    for (const s of bridges) if (s.deadLettered !== undefined) depth = Math.max(depth, s.deadLettered);
    if (depth >= 0) this.set(depth);
  },
});

function keep<K, V>(map: Map<K, V>, key: K, value: V): () => void {
  map.set(key, value);
  return () => {
    if (map.get(key) === value) map.delete(key);
  };
}

/** The API: pending tasks and graphs by state come from this database. Returns the unregister function. */
export function observeQueueDatabase(databaseUrl: string, pool: pg.Pool): () => void {
  return keep(queuePools, databaseUrl, pool);
}

/** The relay: its outbox and its counters. */
export function observeRelay(databaseUrl: string, pool: pg.Pool, stats: RelayStatsView): () => void {
  const forget = keep(outboxPools, databaseUrl, pool);
  relays.add(stats);
  return () => {
    forget();
    relays.delete(stats);
  };
}

/** The hook listener's counters. */
export function observeHookListener(stats: HookListenerStatsView): () => void {
  hookListeners.add(stats);
  return () => hookListeners.delete(stats);
}

/** The bridge's counters. */
export function observeBridge(stats: BridgeStatsView): () => void {
  bridges.add(stats);
  return () => bridges.delete(stats);
}
