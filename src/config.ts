
/** All configuration comes from the environment; every variable is documented in docs/configuration.md. */
export interface Config {
  /** Postgres URL, or `pglite:///<dir>` for the embedded database (src/db/pglite.ts; what `tgs dev` uses without DATABASE_URL). */
  databaseUrl: string;
  /** RabbitMQ URL (several, comma-separated, for the nodes of a cluster: src/exchanges/bus.ts), or `memory://<name>` for the in-process bus (src/exchanges/busMemory.ts; `tgs dev` without AMQP_URL). */
  amqpUrl: string;
  temporalAddress: string;
  temporalNamespace: string;
  /** Client certificate and key files for mTLS to a hosted Temporal; both or neither. Empty: none. */
  temporalTlsCert: string;
  temporalTlsKey: string;
  /** API key for a hosted Temporal (TLS without a client certificate). Empty: none. */
  temporalApiKey: string;
  /** The Temporal Web UI the graph page links to; empty: the dev server's (src/api/ui.ts). */
  temporalUiUrl: string;
  temporalTaskQueue: string;
  /** Public base URL; API paths are `<rootUrl>/api/<service>/v1/...`. */
  rootUrl: string;
  /** Access token of the built-in root client `static/tgs/root` (scopes `*`). Empty disables it. */
  rootAccessToken: string;
  port: number;
  host: string;
  schedulerId: string;
  /** Prepended to every exchange name, e.g. `exchange/tgs/` → `exchange/tgs/queue/v1/task-pending`. */
  exchangePrefix: string;
  /** How long a claim lasts before it must be reclaimed (Taskcluster: 20 min). */
  claimTimeoutSeconds: number;
  /** How long claimWork long-polls before answering with no tasks (Taskcluster: 20 s). */
  claimWorkWaitMs: number;
  /**
   * How long a worker stream lives before the API drains it and the worker opens a new one (TGS_WORKER_STREAM_MAX_AGE_S,
   * default 60 s): its credentials and scopes are checked when it opens, so a disabled client or a removed scope
   * ends its streams within this, as it ends a claimWork long-poll's within 20 s.
   */
  workerStreamMaxAgeMs: number;
  /** How often the background sweeps (claim expiry, deadlines, expiry) run. */
  sweepIntervalMs: number;
  /** Largest artifact upload accepted (bytes are kept in Postgres). */
  maxArtifactBytes: number;
  /**
   * Scheduler ids whose messages the bridge queue is bound to (TGS_BRIDGE_SCHEDULER_IDS, comma-separated);
   * empty: every message of this deployment's exchanges (queue-level dependencies between tasks of any
   * scheduler id). Set it when deployments share an exchange prefix.
   */
  bridgeSchedulerIds: string[];
  /**
   * TGS_BRIDGE_QUEUE_TYPE: the bridge queue's type, `quorum` (replicated, with a delivery limit and a dead-letter
   * queue; src/bridge/bridgeQueue.ts) or `classic` (a broker without quorum queues, or a queue kept from before).
   */
  bridgeQueueType: 'quorum' | 'classic';
  /**
   * Most nodes a task-graph may have (create and extend refuse more with a 400). Continue-as-new carries
   * ~8 bytes a node and Temporal refuses inputs over 2 MB, so past ~260,000 nodes a graph could not go on.
   */
  maxGraphNodes: number;
  /** TGS_CACHE_TIERS: the cache tiers, highest first (src/taskCache/tiers.ts) */
  cacheTiers: string[];
  /**
   * The tgs client a graph started directly on Temporal acts as: its scopes must cover the graph as they would
   * over HTTP. Empty refuses Temporal-native graphs (access to the Temporal namespace is not root).
   */
  temporalClientId: string;
  /** Port of the process's Prometheus `/metrics` (and `/health`) server on `host`; 0 serves none. */
  metricsPort: number;
  /** pino level of the process logs: fatal, error, warn, info, debug, trace or silent. */
  logLevel: string;
  /**
   * TGS_HOOK_TOKEN_KEY: 32 bytes (base64) that seal hooks' trigger tokens at rest (src/hooks/tokenCipher.ts); unset,
   * they are stored as they are.
   */
  hookTokenKey: Buffer | undefined;
  /** TGS_HOOK_MIN_INTERVAL_S: the shortest time a hook's schedule may leave between two fires (src/hooks/scheduleInterval.ts). */
  hookMinIntervalS: number;
  /** TGS_HOOK_LAST_FIRES_DAYS / _MAX: how long, and how many per hook, fires are kept (src/hooks/lastFiresSweep.ts). */
  hookLastFiresDays: number;
  hookLastFiresMax: number;
  /** Largest createTaskGraph / extendTaskGraph body (a 100,000-task graph of the bench is ~35 MB of JSON). */
  maxGraphBytes: number;
  /** Per-process cap on scheduler changes long-polls in flight (src/api/concurrency.ts); beyond it 429. */
  maxConcurrentGraphChanges: number;
  /** Per-process cap on scheduler nodes reads in flight; beyond it 429. */
  maxConcurrentGraphNodes: number;
  /** Per API process: scheduler reads whose cost grows with a graph's size (inspect, info, the graph list) in flight. */
  maxConcurrentGraphReads: number;
  /** How long a pending task waits on a queue with no workers before it is announced on `task-stalled` (src/queue/stalls.ts). */
  stallAfterMs: number;
  /**
   * How long the queue may show a graph's task resolved (or all its requirements met) before the graph's workflow
   * has acted on it, before explanations call it `inconsistent` (src/queue/explainTask.ts).
   */
  inconsistentAfterMs: number;
  maxConcurrentGraphSubmits: number;
  /** Per-process cap on artifact reads and downloads in flight; beyond it 429. */
  maxConcurrentArtifactRequests: number;
}

export const LOG_LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];

export const ROOT_CLIENT_ID = 'static/tgs/root';

function intFromEnv(env: NodeJS.ProcessEnv, name: string, fallback: number): number {
  const raw = env[name];
  if (raw === undefined || raw === '') return fallback;
  const value = Number(raw);
  if (!Number.isInteger(value) || value < 0) {
    throw new Error(`${name} must be a non-negative integer, got ${JSON.stringify(raw)}`);
  }
  return value;
}

/** A comma-separated list of scheduler ids (routing-key words: letters, digits, `-`, `_`). */
function schedulerIdsFromEnv(env: NodeJS.ProcessEnv, name: string): string[] {
  const ids = (env[name] ?? '').split(',').map((id) => id.trim()).filter(Boolean);
  for (const id of ids) {
    if (!/^[A-Za-z0-9_-]{1,22}$/.test(id)) throw new Error(`${name} must be a comma-separated list of scheduler ids, got ${JSON.stringify(id)}`);
  }
  return ids;
}

/** TGS_LOG_LEVEL, checked: a typo must not silently log everything or nothing. */
export function logLevelFromEnv(env: NodeJS.ProcessEnv = process.env): string {
  const raw = (env.TGS_LOG_LEVEL ?? '').trim().toLowerCase();
  if (raw === '') return 'info';
  if (!LOG_LEVELS.includes(raw)) throw new Error(`TGS_LOG_LEVEL must be one of ${LOG_LEVELS.join(', ')}, got ${JSON.stringify(env.TGS_LOG_LEVEL)}`);
  return raw;
}

/** TGS_LOG_FORMAT: `json` or `pretty`; undefined when unset (JSON, or tgs dev's choice for a terminal). */
export function logFormatFromEnv(env: NodeJS.ProcessEnv = process.env): 'json' | 'pretty' | undefined {
  const raw = (env.TGS_LOG_FORMAT ?? '').trim().toLowerCase();
  if (raw === '') return undefined;
  if (raw !== 'json' && raw !== 'pretty') throw new Error(`TGS_LOG_FORMAT must be json or pretty, got ${JSON.stringify(env.TGS_LOG_FORMAT)}`);
  return raw;
}

/** TEMPORAL_CLI: the `temporal` binary for dev servers, when set (src/temporal/devServer.ts searches otherwise). */
export function temporalCliFromEnv(env: NodeJS.ProcessEnv = process.env): string | undefined {
  return env.TEMPORAL_CLI || undefined;
}

/** TGS_BRIDGE_QUEUE_TYPE: `quorum` (default) or `classic`. */
function hookTokenKeyFromEnv(env: NodeJS.ProcessEnv): Buffer | undefined {
  const value = env.TGS_HOOK_TOKEN_KEY;
  if (!value) return undefined;
  const key = Buffer.from(value, 'base64');
  if (key.length !== 32) throw new Error(`TGS_HOOK_TOKEN_KEY must be 32 bytes in base64 (e.g. \`openssl rand -base64 32\`); it decodes to ${key.length} bytes`);
  return key;
}

function bridgeQueueTypeFromEnv(env: NodeJS.ProcessEnv): 'quorum' | 'classic' {
  const raw = (env.TGS_BRIDGE_QUEUE_TYPE ?? '').trim().toLowerCase();
  if (raw === '') return 'quorum';
  if (raw !== 'quorum' && raw !== 'classic') {
    throw new Error(`TGS_BRIDGE_QUEUE_TYPE must be quorum or classic, got ${JSON.stringify(env.TGS_BRIDGE_QUEUE_TYPE)}`);
  }
  return raw;
}

/**
 * TGS_PG_STATEMENT_TIMEOUT_MS and TGS_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS as Postgres session settings for every pooled
 * connection (src/db/pool.ts), e.g. `-c statement_timeout=30000`; unset or 0 leaves the server's (or the role's)
 * setting. Read where pools are made, which know only DATABASE_URL.
 */
export function postgresTimeoutsFromEnv(env: NodeJS.ProcessEnv = process.env): string {
  const statement = intFromEnv(env, 'TGS_PG_STATEMENT_TIMEOUT_MS', 0);
  const idleInTransaction = intFromEnv(env, 'TGS_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS', 0);
  return `${statement ? ` -c statement_timeout=${statement}` : ''}${idleInTransaction ? ` -c idle_in_transaction_session_timeout=${idleInTransaction}` : ''}`;
}

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const port = intFromEnv(env, 'PORT', 8080);
  const config: Config = {
    databaseUrl: env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/tgs',
    amqpUrl: env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672',
    temporalAddress: env.TEMPORAL_ADDRESS || '127.0.0.1:7233',
    temporalNamespace: env.TEMPORAL_NAMESPACE || 'default',
    temporalTlsCert: env.TEMPORAL_TLS_CERT ?? '',
    temporalTlsKey: env.TEMPORAL_TLS_KEY ?? '',
    temporalApiKey: env.TEMPORAL_API_KEY ?? '',
    temporalUiUrl: env.TGS_TEMPORAL_UI_URL ?? '',
    temporalTaskQueue: env.TGS_TASK_QUEUE || 'tgs-scheduler',
    rootUrl: (env.TGS_ROOT_URL || `http://127.0.0.1:${port}`).replace(/\/+$/, ''),
    rootAccessToken: env.TGS_ROOT_ACCESS_TOKEN ?? '',
    port,
    host: env.HOST || '127.0.0.1',
    schedulerId: env.TGS_SCHEDULER_ID || 'task-graph-scheduler',
    exchangePrefix: env.TGS_EXCHANGE_PREFIX ?? '',
    claimTimeoutSeconds: intFromEnv(env, 'TGS_CLAIM_TIMEOUT', 20 * 60),
    claimWorkWaitMs: intFromEnv(env, 'TGS_CLAIM_WORK_WAIT_MS', 20_000),
    workerStreamMaxAgeMs: Math.max(1, intFromEnv(env, 'TGS_WORKER_STREAM_MAX_AGE_S', 60)) * 1000,
    sweepIntervalMs: intFromEnv(env, 'TGS_SWEEP_INTERVAL_MS', 5000),
    maxArtifactBytes: intFromEnv(env, 'TGS_MAX_ARTIFACT_BYTES', 64 * 1024 * 1024),
    bridgeSchedulerIds: schedulerIdsFromEnv(env, 'TGS_BRIDGE_SCHEDULER_IDS'),
    bridgeQueueType: bridgeQueueTypeFromEnv(env),
    // what bounds it: src/scheduler/nodeLimit.ts
    maxGraphNodes: intFromEnv(env, 'TGS_MAX_GRAPH_NODES', 300_000),
    cacheTiers: parseCacheTiers(env.TGS_CACHE_TIERS),
    temporalClientId: env.TGS_TEMPORAL_CLIENT_ID ?? '',
    metricsPort: intFromEnv(env, 'TGS_METRICS_PORT', 0),
    logLevel: logLevelFromEnv(env),
    maxGraphBytes: intFromEnv(env, 'TGS_MAX_GRAPH_BYTES', 256 * 1024 * 1024),
    hookTokenKey: hookTokenKeyFromEnv(env),
    hookMinIntervalS: intFromEnv(env, 'TGS_HOOK_MIN_INTERVAL_S', 60),
    hookLastFiresDays: Math.max(1, intFromEnv(env, 'TGS_HOOK_LAST_FIRES_DAYS', 30)),
    hookLastFiresMax: Math.max(1, intFromEnv(env, 'TGS_HOOK_LAST_FIRES_MAX', 1000)),
    // The API's pool has 20 connections. A nodes read (4) or an artifact read (8) holds one for its whole
    // duration, leaving at least 8 to claims and reports; a changes poll holds one only while its query runs
    // (a few ms every 200 ms), so 64 of them keep about 2 busy on average.
    maxConcurrentGraphChanges: intFromEnv(env, 'TGS_MAX_CONCURRENT_GRAPH_CHANGES', 64),
    maxConcurrentGraphNodes: intFromEnv(env, 'TGS_MAX_CONCURRENT_GRAPH_NODES', 4),
    maxConcurrentGraphReads: intFromEnv(env, 'TGS_MAX_CONCURRENT_GRAPH_READS', 4),
    stallAfterMs: intFromEnv(env, 'TGS_STALL_AFTER_MS', 600_000),
    // A resolution reaches its graph through the relay's read, its graph-signal lane and a workflow task: p99 of that
    // hop is well under a second even under the bench's load, so 10 s is no ordinary transition.
    inconsistentAfterMs: intFromEnv(env, 'TGS_INCONSISTENT_AFTER_MS', 10_000),
    maxConcurrentGraphSubmits: intFromEnv(env, 'TGS_MAX_CONCURRENT_GRAPH_SUBMITS', 4),
    maxConcurrentArtifactRequests: intFromEnv(env, 'TGS_MAX_CONCURRENT_ARTIFACT_REQUESTS', 8),
    ...overrides,
  };
  return config;
}

// Cache tiers' names are read with the rest of the configuration; what a tier means is src/taskCache/tiers.ts.
/** A tier's or a cache name's characters: one index path part, and a routing-key word. */
export const CACHE_WORD = /^[A-Za-z0-9_-]{1,64}$/;

/** TGS_CACHE_TIERS: comma-separated, highest first; unset or empty: one tier, `default`. */
export function parseCacheTiers(raw: string | undefined): string[] {
  const tiers = (raw ?? '').split(',').map((t) => t.trim()).filter(Boolean);
  for (const t of tiers) {
    if (!CACHE_WORD.test(t)) throw new Error(`TGS_CACHE_TIERS must be comma-separated tier names of letters, digits, _ and - (at most 64 each), got ${JSON.stringify(t)}`);
  }
  if (new Set(tiers).size !== tiers.length) throw new Error(`TGS_CACHE_TIERS names a tier twice: ${JSON.stringify(raw)}`);
  return tiers.length > 0 ? tiers : ['default'];
}
