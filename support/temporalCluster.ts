import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { closeSync, mkdirSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import pg from 'pg';
import { ensureTemporalCli, freePort, listensOn } from '../src/temporal/devServer.js';
import { ensureTemporalServerBuild, type TemporalServerBuild } from './temporalServerBuild.js';

/**
 * A Temporal cluster on one machine, as platform teams run Temporal: frontend, history, matching and worker as four
 * `temporal-server` processes on Postgres (a database and a visibility database of the cluster's own), with the
 * config template deploy/temporal-cluster/config.yaml and tgs's dynamic config. Used by the cluster tests, the fault
 * suite's cluster topology and `npm run temporal-cluster` (docs/deployments.md, "Try tgs on a Temporal cluster").
 */
export const CLUSTER_SERVICES = ['history', 'matching', 'frontend', 'worker'] as const;
export type ClusterService = (typeof CLUSTER_SERVICES)[number];

const ROOT = path.resolve(import.meta.dirname, '..');
const execFileAsync = promisify(execFile);

export interface TemporalClusterOptions {
  /** Names the cluster's databases (`temporal_<name>`, `temporal_<name>_visibility`); random when omitted. */
  name?: string;
  /** Where the processes' logs go (`<dir>/<service>.log`); a new temporary directory when omitted. */
  dir?: string;
  /** History shards (4): a few, so that graphs spread over shards as on a production cluster. */
  shards?: number;
  /**
   * Connections each process may hold to its database (6), plus 2 to visibility: 4 × 8 = 32 of Postgres' 100
   * (max_connections), which tgs's own pools and every other client of the server share.
   */
  maxConns?: number;
  /** The Postgres server (127.0.0.1:5432, user postgres, trust or password). */
  postgres?: { host?: string; port?: number; user?: string; password?: string };
  /** The namespace registered once the cluster serves (`default`). */
  namespace?: string;
  /** Temporal's log level in the processes' log files (warn). */
  logLevel?: string;
  /** Progress lines. */
  log?: (line: string) => void;
}

export interface ClusterProcess {
  pid: number;
  /** gRPC port */
  port: number;
  membershipPort: number;
  metricsPort: number;
  logFile: string;
}

export interface TemporalCluster {
  name: string;
  /** The frontend, as TEMPORAL_ADDRESS takes it. */
  address: string;
  namespace: string;
  databases: { main: string; visibility: string };
  dir: string;
  processes: Record<ClusterService, ClusterProcess>;
  /** Sends `signal` (SIGKILL by default) to one service's process and waits until it has exited. */
  kill(service: ClusterService, signal?: NodeJS.Signals): Promise<void>;
  /** Starts a service again on its ports (stopping it first with SIGTERM if it runs); resolves once it serves, with the milliseconds that took. */
  restart(service: ClusterService): Promise<number>;
  /** Stops every process (SIGTERM, SIGKILL after 10 s); drops the databases with `dropDatabases` (and the log directory, when it was a temporary one). */
  stop(options?: { dropDatabases?: boolean }): Promise<void>;
}

interface Running {
  child: ChildProcess;
  exited: Promise<void>;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/**
 * A free port under 32768. The cluster_membership table keeps each process's port in a SMALLINT, so a process on
 * one of Linux's ephemeral ports (32768-60999, where `listen(0)` lands) cannot join: it exits with `value "34219"
 * is out of range for type smallint`. Tried at random in 20000-32767, where nothing of this machine listens by
 * default, through freePort (which keeps a port it probed from being handed out again at once).
 */
async function freeLowPort(): Promise<number> {
  for (let attempt = 0; attempt < 50; attempt++) {
    const candidate = 20000 + Math.floor(Math.random() * 12768);
    if ((await freePort(candidate)) === candidate) return candidate;
  }
  throw new Error('no free port in 20000-32767 after 50 tries');
}

/** The last lines of a log file, for an error that says why a process did not come up (Temporal logs JSON lines: their level, message and error). */
function tail(file: string, lines = 8): string {
  try {
    return readFileSync(file, 'utf8')
      .trimEnd()
      .split('\n')
      .slice(-lines)
      .map((line) => {
        try {
          const entry = JSON.parse(line) as { level?: string; msg?: string; error?: string };
          return `${entry.level} ${entry.msg}${entry.error ? `: ${entry.error}` : ''}`;
        } catch {
          return line;
        }
      })
      .join('\n');
  } catch {
    return '(no log)';
  }
}

/**
 * Every cluster process this Node process started and has not seen exit: SIGKILLed when Node exits (its end, or
 * process.exit). A signal that kills Node skips this; a test file killed by scripts/test.mjs takes its process group,
 * which these processes are in, and `npm run temporal-cluster -- stop` ends those of a killed start.
 */
const live = new Set<ChildProcess>();
let exitHookInstalled = false;
function killLiveOnExit(): void {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.once('exit', () => {
    for (const child of live) child.kill('SIGKILL');
  });
}

export async function startTemporalCluster(options: TemporalClusterOptions = {}): Promise<TemporalCluster> {
  const log = options.log ?? (() => undefined);
  const name = options.name ?? `t${randomBytes(4).toString('hex')}`;
  if (!/^[a-z][a-z0-9_]{0,39}$/.test(name)) throw new Error(`cluster name "${name}": use lowercase letters, digits and _ (it names Postgres databases), starting with a letter`);
  const dir = options.dir ?? mkdtempSync(path.join(tmpdir(), `tgs-temporal-cluster-${name}-`));
  mkdirSync(dir, { recursive: true });
  const namespace = options.namespace ?? 'default';
  const pgOptions = postgresOf(options.postgres);
  const databases = clusterDatabases(name);

  const build = ensureTemporalServerBuild((line) => log(line.replace(/^tgs: /, '')));
  const cli = ensureTemporalCli((line) => log(line.replace(/^tgs: /, '')));

  const schemaStarted = Date.now();
  const created = !(await databaseExists(pgOptions, databases.main));
  for (const [database, schema] of [[databases.main, 'temporal'], [databases.visibility, 'visibility']] as const) {
    await setUpDatabase(build, pgOptions, database, schema, log);
  }
  log(`databases ${databases.main} and ${databases.visibility} ready (${Date.now() - schemaStarted} ms)`);

  const processes = {} as Record<ClusterService, ClusterProcess>;
  for (const service of CLUSTER_SERVICES) {
    processes[service] = {
      pid: 0,
      port: await freeLowPort(),
      membershipPort: await freeLowPort(),
      metricsPort: await freePort(),
      logFile: path.join(dir, `${service}.log`),
    };
  }
  const address = `127.0.0.1:${processes.frontend.port}`;
  const sharedEnv: Record<string, string> = {
    TEMPORAL_CLUSTER_LOG_LEVEL: options.logLevel ?? 'warn',
    TEMPORAL_CLUSTER_SHARDS: String(options.shards ?? 4),
    TEMPORAL_CLUSTER_DB: databases.main,
    TEMPORAL_CLUSTER_VISIBILITY_DB: databases.visibility,
    TEMPORAL_CLUSTER_PG_ADDRESS: `${pgOptions.host}:${pgOptions.port}`,
    TEMPORAL_CLUSTER_PG_USER: pgOptions.user,
    TEMPORAL_CLUSTER_PG_PASSWORD: pgOptions.password,
    TEMPORAL_CLUSTER_MAX_CONNS: String(options.maxConns ?? 6),
    TEMPORAL_CLUSTER_DYNAMIC_CONFIG: path.join(ROOT, 'deploy', 'temporal-dynamicconfig.yaml'),
  };
  for (const service of CLUSTER_SERVICES) {
    const upper = service.toUpperCase();
    sharedEnv[`TEMPORAL_CLUSTER_${upper}_PORT`] = String(processes[service].port);
    sharedEnv[`TEMPORAL_CLUSTER_${upper}_MEMBERSHIP_PORT`] = String(processes[service].membershipPort);
  }

  const running = new Map<ClusterService, Running>();
  killLiveOnExit();

  const launch = (service: ClusterService): Running => {
    const proc = processes[service];
    const logFd = openSync(proc.logFile, 'a');
    const child = spawn(
      build.server,
      ['--root', path.join(ROOT, 'deploy'), '--config', 'temporal-cluster', '--env', 'config', '--allow-no-auth', 'start', '--service', service],
      { stdio: ['ignore', logFd, logFd], env: { ...process.env, ...sharedEnv, TEMPORAL_CLUSTER_METRICS_PORT: String(proc.metricsPort) } },
    );
    closeSync(logFd);
    if (child.pid === undefined) throw new Error(`could not start ${build.server}`);
    live.add(child);
    proc.pid = child.pid;
    const exited = new Promise<void>((resolve) =>
      child.once('exit', () => {
        live.delete(child);
        resolve();
      }),
    );
    const entry = { child, exited };
    running.set(service, entry);
    return entry;
  };

  /** Resolves once the service listens (the frontend: once it answers GetSystemInfo). */
  const awaitServing = async (service: ClusterService, timeoutMs = 60_000) => {
    const proc = processes[service];
    const entry = running.get(service);
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (!entry || entry.child.exitCode !== null || entry.child.signalCode !== null) {
        throw new Error(`temporal ${service} exited while starting; the end of ${proc.logFile}:\n${tail(proc.logFile)}`);
      }
      // the worker service serves no gRPC (its port only names it in the membership ring): it is up once it
      // listens for the ring's gossip
      const port = service === 'worker' ? proc.membershipPort : proc.port;
      if (listensOn(proc.pid, port) !== false && (service !== 'frontend' || (await frontendAnswers(address)))) return;
      if (Date.now() > deadline) throw new Error(`temporal ${service} did not serve on 127.0.0.1:${port} within ${timeoutMs / 1000} s; the end of ${proc.logFile}:\n${tail(proc.logFile)}`);
      await sleep(200);
    }
  };

  const stopService = async (service: ClusterService, signal: NodeJS.Signals) => {
    const entry = running.get(service);
    if (!entry) return;
    if (entry.child.exitCode === null && entry.child.signalCode === null) {
      entry.child.kill(signal);
      const timer = setTimeout(() => entry.child.kill('SIGKILL'), 10_000);
      await entry.exited;
      clearTimeout(timer);
    }
    running.delete(service);
  };

  const stopAll = async () => {
    await Promise.all(CLUSTER_SERVICES.map((service) => stopService(service, 'SIGTERM')));
  };

  try {
    const started = Date.now();
    // History first, alone: each process writes the cluster's metadata record at start if it is missing, and on a
    // new database two doing so at once made one exit ("failed to initialize current cluster metadata"). Once one
    // process serves, the others find the record; they start together.
    launch('history');
    await awaitServing('history');
    for (const service of CLUSTER_SERVICES) if (service !== 'history') launch(service);
    log(`started ${CLUSTER_SERVICES.map((s) => `${s} (pid ${processes[s].pid}, :${processes[s].port})`).join(', ')}; logs in ${dir}`);
    await Promise.all(CLUSTER_SERVICES.map((service) => awaitServing(service)));
    log(`all four services serve (${Date.now() - started} ms); frontend at ${address}`);
    await registerNamespace(cli, address, namespace);
    log(`namespace ${namespace} registered (${Date.now() - started} ms after start)`);
  } catch (err) {
    await stopAll();
    // databases this start created go with it; a kept cluster's stay
    if (created) await dropTemporalClusterDatabases(name, options.postgres).catch(() => undefined);
    throw err;
  }

  return {
    name,
    address,
    namespace,
    databases,
    dir,
    processes,
    async kill(service, signal = 'SIGKILL') {
      const entry = running.get(service);
      if (!entry) throw new Error(`temporal ${service} is not running`);
      entry.child.kill(signal);
      await entry.exited;
      running.delete(service);
    },
    async restart(service) {
      await stopService(service, 'SIGTERM');
      const started = Date.now();
      launch(service);
      await awaitServing(service);
      return Date.now() - started;
    },
    async stop(stopOptions = {}) {
      await stopAll();
      if (stopOptions.dropDatabases) {
        await dropTemporalClusterDatabases(name, options.postgres);
        log(`dropped ${databases.main} and ${databases.visibility}`);
        // the logs of a temporary directory go with the databases; a given directory is the caller's
        if (options.dir === undefined) rmSync(dir, { recursive: true, force: true });
      }
    },
  };
}

/** The databases of the cluster named `name`. */
export function clusterDatabases(name: string): { main: string; visibility: string } {
  return { main: `temporal_${name}`, visibility: `temporal_${name}_visibility` };
}

/** Drops the cluster's databases (those that exist), with Temporal's schema tool; its processes must be stopped. */
export async function dropTemporalClusterDatabases(name: string, postgres?: TemporalClusterOptions['postgres']): Promise<void> {
  const build = ensureTemporalServerBuild();
  const pgOptions = postgresOf(postgres);
  const { main, visibility } = clusterDatabases(name);
  for (const database of [main, visibility]) {
    if (await databaseExists(pgOptions, database)) await sqlTool(build, pgOptions, database, ['drop-database', '--force']);
  }
}

const postgresOf = (postgres: TemporalClusterOptions['postgres'] = {}): PgOptions => ({ host: '127.0.0.1', port: 5432, user: 'postgres', password: '', ...postgres });

async function frontendAnswers(address: string): Promise<boolean> {
  const { Connection } = await import('@temporalio/client');
  try {
    const connection = await Connection.connect({ address, connectTimeout: 1000 });
    try {
      await connection.workflowService.getSystemInfo({});
      return true;
    } finally {
      await connection.close();
    }
  } catch {
    return false;
  }
}

type PgOptions = { host: string; port: number; user: string; password: string };

function sqlToolArgs(pgOptions: PgOptions, database: string): string[] {
  const args = ['--plugin', 'postgres12', '--ep', pgOptions.host, '-p', String(pgOptions.port), '-u', pgOptions.user, '--db', database, '--quiet'];
  if (pgOptions.password) args.push('--password', pgOptions.password);
  return args;
}

async function sqlTool(build: TemporalServerBuild, pgOptions: PgOptions, database: string, command: string[]): Promise<void> {
  try {
    await execFileAsync(build.sqlTool, [...sqlToolArgs(pgOptions, database), ...command], { timeout: 120_000 });
  } catch (err) {
    const e = err as Error & { stderr?: string; stdout?: string };
    throw new Error(`temporal-sql-tool ${command[0]} on ${database} failed: ${(e.stderr || e.stdout || e.message).trim()}`);
  }
}

async function databaseExists(pgOptions: PgOptions, database: string): Promise<boolean> {
  const client = new pg.Client({ ...pgOptions, database: 'postgres' });
  await client.connect();
  try {
    return ((await client.query('SELECT 1 FROM pg_database WHERE datname = $1', [database])).rowCount ?? 0) > 0;
  } finally {
    await client.end();
  }
}

/**
 * Creates the database and its schema with Temporal's own tool, as an operator does; a database left by an earlier
 * run of the same cluster name is kept and brought up to date (`update-schema` applies only the missing versions),
 * so that a cluster started again keeps its workflows.
 */
async function setUpDatabase(build: TemporalServerBuild, pgOptions: PgOptions, database: string, schema: 'temporal' | 'visibility', log: (line: string) => void) {
  if (await databaseExists(pgOptions, database)) {
    log(`database ${database} exists: keeping it, updating its schema`);
  } else {
    await sqlTool(build, pgOptions, database, ['create-database']);
    await sqlTool(build, pgOptions, database, ['setup-schema', '-v', '0.0']);
  }
  await sqlTool(build, pgOptions, database, ['update-schema', '-d', path.join(build.postgresSchemaDir, schema, 'versioned')]);
}

/** Registers the namespace with the stock CLI, as an operator does; one left by an earlier run is kept. */
async function registerNamespace(cli: string, address: string, namespace: string): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    try {
      await execFileAsync(cli, ['operator', 'namespace', 'create', '--namespace', namespace, '--retention', '72h', '--address', address], { timeout: 20_000 });
      return;
    } catch (err) {
      const e = err as Error & { stderr?: string };
      const message = (e.stderr || e.message).trim();
      if (/already exists|AlreadyExists/i.test(message)) return;
      if (Date.now() > deadline) throw new Error(`registering the namespace ${namespace} on ${address} failed: ${message}`);
      await sleep(500);
    }
  }
}
