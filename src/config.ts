/** All configuration comes from the environment; every variable is documented in README.md. */
export interface Config {
  /** Postgres URL, or `pglite:///<dir>` for the embedded database (src/db/pglite.ts; what `tgs dev` uses without DATABASE_URL). */
  databaseUrl: string;
  /** RabbitMQ URL, or `memory://<name>` for the in-process bus (src/exchanges/busMemory.ts; `tgs dev` without AMQP_URL). */
  amqpUrl: string;
  temporalAddress: string;
  temporalNamespace: string;
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
  /** How often the background sweeps (claim expiry, deadlines, expiry) run. */
  sweepIntervalMs: number;
  /** Largest artifact upload accepted (bytes are kept in Postgres). */
  maxArtifactBytes: number;
}

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

export function loadConfig(env: NodeJS.ProcessEnv = process.env, overrides: Partial<Config> = {}): Config {
  const port = intFromEnv(env, 'PORT', 8080);
  const config: Config = {
    databaseUrl: env.DATABASE_URL || 'postgres://postgres@127.0.0.1:5432/tgs',
    amqpUrl: env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672',
    temporalAddress: env.TEMPORAL_ADDRESS || '127.0.0.1:7233',
    temporalNamespace: env.TEMPORAL_NAMESPACE || 'default',
    temporalTaskQueue: env.TGS_TASK_QUEUE || 'tgs-scheduler',
    rootUrl: (env.TGS_ROOT_URL || `http://127.0.0.1:${port}`).replace(/\/+$/, ''),
    rootAccessToken: env.TGS_ROOT_ACCESS_TOKEN ?? '',
    port,
    host: env.HOST || '127.0.0.1',
    schedulerId: env.TGS_SCHEDULER_ID || 'task-graph-scheduler',
    exchangePrefix: env.TGS_EXCHANGE_PREFIX ?? '',
    claimTimeoutSeconds: intFromEnv(env, 'TGS_CLAIM_TIMEOUT', 20 * 60),
    claimWorkWaitMs: intFromEnv(env, 'TGS_CLAIM_WORK_WAIT_MS', 20_000),
    sweepIntervalMs: intFromEnv(env, 'TGS_SWEEP_INTERVAL_MS', 5000),
    maxArtifactBytes: intFromEnv(env, 'TGS_MAX_ARTIFACT_BYTES', 64 * 1024 * 1024),
    ...overrides,
  };
  return config;
}
