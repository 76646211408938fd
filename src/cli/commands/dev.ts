import type { Command } from 'commander';
import { stopInOrder } from '../stopInOrder.js';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import slugid from 'slugid';
import { loadConfig, ROOT_CLIENT_ID, type Config } from '../../config.js';
import { buildApi, type ApiApp } from '../../processes/api.js';
import { startRelay } from '../../relay/relay.js';
import { startBridge } from '../../bridge/bridge.js';
import { startHookListener } from '../../hooks/listener.js';
import { memoryBusUrl, safeBusUrl } from '../../exchanges/bus.js';
import { pgliteUrl } from '../../db/pglite.js';
import { acquireDirLock } from '../../db/pgliteLock.js';
import { ensureSearchAttributes } from '../../temporal/searchAttributes.js';
import { createSchedulerWorker } from '../../processes/schedulerWorker.js';
import { findTemporalCli, freePort, startDevServer, TGS_SEARCH_ATTRIBUTES, type DevServer } from '../../temporal/devServer.js';
import { ensureStaticClient } from '../../auth/clients.js';
import { prepareDataDir, rootAccessToken } from '../devDataDir.js';
import type { TgsCredentials } from '../../client/http.js';
import { GraphNotFinishedError, TgsApiError, TgsClient, type TaskGraph } from '../../client/tgsClient.js';
import { readGraphFile, withTaskDefaults } from '../graphFile.js';
import { Progress } from '../progress.js';
import { startShellWorker, type IsolationMode, type NetworkMode, type ShellWorker } from '../../shellWorker/index.js';
import { LIVE_LOG } from '../../queue/liveLogName.js';
import { onShutdown } from '../shutdown.js';
import { portHolder } from '../portHolder.js';
import { DEV_TEMPORAL_CLIENT_ID, ensureDevTemporalClient } from '../../scheduler/temporalNativeAuth.js';
import { configureLogging, lineLogger, logger, type LogFormat } from '../../log.js';
import { logFormatFromEnv } from '../../config.js';
import { observeBridge, observeHookListener, observeRelay } from '../../observability/metrics.js';
import { startMetricsServer } from '../../observability/metricsServer.js';
import { installTemporalRuntime } from '../../temporal/runtime.js';

/** Where `tgs dev --workers N` workers take their tasks from; graphs for them use these. */
export const DEV_PROVISIONER_ID = 'tgs-dev';
export const DEV_WORKER_TYPE = 'shell';
/** The client `--workers` use: worker scopes only (a task's own actions use the credentials claimWork hands out). */
export const DEV_WORKER_CLIENT_ID = 'static/tgs/dev-workers';
export const DEV_WORKER_GROUP = 'tgs-dev';
export const DEV_WORKER_SCOPES = [`queue:claim-work:${DEV_PROVISIONER_ID}/${DEV_WORKER_TYPE}`, `queue:worker-id:${DEV_WORKER_GROUP}/*`];

/** How often a part that has not stopped yet says so while tgs dev stops. */
const STOP_PROGRESS_MS = 3000;

/** The API port of a first `tgs dev` on a data directory. */
const DEFAULT_API_PORT = 8080;

export interface DevOptions {
  port?: string;
  temporalPort: string;
  uiPort: string;
  dataDir: string;
  workers: string;
  submit: string[];
  exit?: boolean;
  logFormat?: string;
  isolation?: string;
  network?: string;
}

/** --log-format, else TGS_LOG_FORMAT, else pretty lines for a person at a terminal and JSON for anything else. */
function devLogFormat(flag: string | undefined): LogFormat {
  if (flag !== undefined) {
    if (flag !== 'json' && flag !== 'pretty') throw new Error(`--log-format ${JSON.stringify(flag)}: give json or pretty`);
    return flag;
  }
  return logFormatFromEnv() ?? (process.stdout.isTTY ? 'pretty' : 'json');
}

/** A URL to print: without its password. */
function safeUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString();
  } catch {
    return url;
  }
}

function positiveInt(value: string, flag: string, min: number): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < min || n > 65535) throw new Error(`${flag} ${JSON.stringify(value)}: give a whole number (at least ${min})`);
  return n;
}

/**
 * The Temporal dev server on the preferred ports, or on free ones when they are taken. Two `tgs dev`
 * starting at the same moment can both see a port free: the loser's server fails to bind and is
 * started again elsewhere.
 */
async function startTemporal(opts: DevOptions, dataDir: string): Promise<DevServer> {
  let port = await freePort(positiveInt(opts.temporalPort, '--temporal-port', 1));
  let uiPort = await freePort(positiveInt(opts.uiPort, '--ui-port', 1));
  for (let attempt = 1; ; attempt++) {
    try {
      return await startDevServer({
        port,
        uiPort,
        headless: false,
        dbFilename: path.join(dataDir, 'temporal.db'),
        searchAttributes: TGS_SEARCH_ATTRIBUTES,
        log: lineLogger(logger('temporal-server')),
      });
    } catch (err) {
      if (attempt >= 3 || !/address already in use|bind/i.test((err as Error).message)) throw err;
      port = await freePort();
      uiPort = await freePort();
    }
  }
}

/** Where a data directory keeps the API port it listened on last, so a restart keeps the exported TGS_ROOT_URL. */
const portFile = (dataDir: string) => path.join(dataDir, 'api-port');

function rememberedPort(dataDir: string): number | undefined {
  if (!existsSync(portFile(dataDir))) return undefined;
  const port = Number(readFileSync(portFile(dataDir), 'utf8').trim());
  return Number.isInteger(port) && port > 0 && port <= 65535 ? port : undefined;
}

/** How many ports after the preferred one a start tries, in order, before it gives up. */
const PORTS_TRIED = 20;

/**
 * Listens on the preferred port; when it is taken, says so (and by whom, when /proc tells) and tries the next ones
 * in order, since a random port would change at every restart and leave another shell's exported TGS_ROOT_URL on
 * another instance. A port given with --port is the user's: taken, it is an error.
 */
async function listenApi(api: ApiApp, config: Config, preferred: number, explicit: boolean, dataDir: string): Promise<string> {
  for (let port = preferred; port < preferred + PORTS_TRIED && port <= 65535; port++) {
    config.port = port;
    try {
      const url = await api.listen();
      writeFileSync(portFile(dataDir), `${port}\n`);
      return url;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE') throw err;
      const who = portHolder(port);
      if (explicit) throw new Error(`port ${port} is taken${who}: stop that, or give another --port (without --port, tgs dev tries the next ports)`);
      console.log(`tgs dev: port ${port} is taken${who}; trying ${port + 1}`);
    }
  }
  throw new Error(`ports ${preferred}-${preferred + PORTS_TRIED - 1} are all taken: give a free one with --port`);
}

type GraphEnd = 'finished' | 'blocked' | 'canceled' | 'terminated' | 'failed';

/**
 * Submits a graph file as `tgs graph submit` does (same file reader and task defaults) and prints its
 * progress as plain lines prefixed with the file name (worker lines interleave) until it finishes, blocks
 * or is canceled; a blocked graph's first blocking task gets the end of its log.
 */
async function submitAndWatch(client: TgsClient, file: string, name: string, isStopping: () => boolean): Promise<GraphEnd> {
  const prefixed = { isTTY: false, write: (text: string) => process.stdout.write(text.replace(/^(?=.)/gm, `[${name}] `)) } as unknown as NodeJS.WriteStream;
  let taskGraphId: string;
  try {
    const graph = readGraphFile(file) as unknown as TaskGraph;
    taskGraphId = slugid.nice();
    const meta = (graph.metadata ?? {}) as Record<string, string>;
    const tasks = withTaskDefaults(graph.tasks, { now: Date.now(), owner: meta.owner ?? 'tgs-dev', source: meta.source ?? client.graphUrl(taskGraphId) });
    await client.submitGraph({ ...graph, metadata: { name: path.basename(file).replace(/\.(json|ya?ml)$/i, ''), ...meta }, tasks }, { taskGraphId });
  } catch (err) {
    const message = err instanceof TgsApiError ? `${err.code}: ${err.message}` : (err as Error).message;
    prefixed.write(`not submitted: ${message}\n`);
    return 'failed';
  }
  prefixed.write(`submitted as task graph ${taskGraphId}: ${client.graphUrl(taskGraphId)}\n`);
  const progress = new Progress(client, taskGraphId, prefixed);
  const stopped = new AbortController();
  const poll = setInterval(() => isStopping() && stopped.abort(), 200);
  const started = Date.now();
  try {
    const info = await client.waitForGraph(taskGraphId, { onProgress: (i) => progress.update(i), signal: stopped.signal });
    prefixed.write(`finished in ${Math.round((Date.now() - started) / 1000)} s: ${info.counts.completed ?? 0} of ${info.taskCount} tasks completed\n`);
    return 'finished';
  } catch (err) {
    if (!(err instanceof GraphNotFinishedError)) {
      if (!isStopping()) prefixed.write(`cannot follow it: ${(err as Error).message}\n`);
      return 'failed';
    }
    prefixed.write(`${err.message}\n`);
    const first = err.blocking[0];
    if (first) {
      const log = await client.artifact(first.taskId, LIVE_LOG).then((a) => a.data.toString('utf8'), () => '');
      const tail = log.replace(/\n$/, '').split('\n').slice(-20).join('\n');
      if (tail) prefixed.write(`--- end of ${first.label}'s ${LIVE_LOG} ---\n${tail}\n---\n`);
      prefixed.write(`full log: tgs task log ${first.taskId}; rerun: tgs graph rerun ${taskGraphId} ${first.label}\n`);
    }
    return err.state;
  } finally {
    clearInterval(poll);
  }
}

/**
 * `tgs dev`: the whole system in one process — a Temporal dev server (unless TEMPORAL_ADDRESS is set), the
 * API, the outbox relay, the bridge, the scheduler worker and `--workers N` shell workers — against
 * Postgres/RabbitMQ when DATABASE_URL/AMQP_URL are set, else the embedded PGlite database (kept in
 * `<data-dir>/pglite`) and the in-process message bus.
 */
export function registerDevCommand(program: Command): void {
  program
    .command('dev')
    .description('run everything in one process: Temporal dev server, API, relay, bridge, scheduler worker, shell workers')
    .option('--port <port>', `API port (default: the one this data directory used last, else ${DEFAULT_API_PORT}, or the next free one after it; a --port that is taken is an error)`)
    .option('--temporal-port <port>', 'Temporal dev server port (taken: a free one is used)', '7233')
    .option('--ui-port <port>', 'Temporal Web UI port (taken: a free one is used)', '8233')
    .option('--data-dir <dir>', 'state of this instance: embedded database, Temporal history, root token (one tgs dev per directory)', '.tgs')
    .option('--workers <n>', `shell workers to run in-process (provisionerId ${DEV_PROVISIONER_ID}, workerType ${DEV_WORKER_TYPE})`, '0')
    .option('--isolation <mode>', 'how --workers sandbox each run: bwrap, user (root) or none (unsafe); default: the strongest this machine gives, else none with a warning')
    .option('--network <mode>', "what --workers' runs reach: api (only the tgs API), none, internet or host (unsafe); default api where the machine gives it, else host with a warning")
    .option('--submit <file>', 'once started, submit this task graph (JSON or YAML) and show its progress; repeatable', (v: string, all: string[]) => [...all, v], [] as string[])
    .option('--exit', 'with --submit: stop everything when the graphs are done (exit 0 if all finished, else 1)')
    .option('--log-format <format>', 'process logs as json lines or pretty (readable) lines (default: pretty on a terminal, else json; TGS_LOG_FORMAT)')
    .action(async (opts: DevOptions) => {
      const cleanups: { name: string; run: () => Promise<void> }[] = [];
      let stopping: Promise<void> | undefined;
      const stop = () =>
        (stopping ??= (async () => {
          const say = { progress: (line: string) => console.log(`tgs dev: ${line}`), error: (line: string) => console.error(`tgs dev: ${line}`) };
          await stopInOrder(cleanups, say, STOP_PROGRESS_MS);
        })());
      try {
        // First, so every part's logger writes in the chosen format.
        configureLogging({ format: devLogFormat(opts.logFormat) });
        await runDev(opts, cleanups, stop, () => stopping !== undefined);
      } catch (err) {
        console.error(`tgs dev: ${(err as Error).message}`);
        await stop();
        process.exit(1);
      }
    });
}

async function runDev(
  opts: DevOptions,
  cleanups: { name: string; run: () => Promise<void> }[],
  stop: () => Promise<void>,
  isStopping: () => boolean,
): Promise<void> {
  const env = process.env;
  const workers = positiveInt(opts.workers, '--workers', 0);
  if (opts.exit && opts.submit.length === 0) throw new Error('--exit needs at least one --submit FILE');
  const dataDir = path.resolve(opts.dataDir);
  prepareDataDir(dataDir);
  const lock = acquireDirLock(
    path.join(dataDir, 'dev.lock'),
    `the tgs dev data directory ${dataDir}`,
    'stop the other tgs dev first, or give this one its own directory: tgs dev --data-dir <another directory>',
  );
  cleanups.push({ name: 'the data directory lock', run: async () => lock.release() });
  // From here on Ctrl-C stops whatever has started (the first start may build the Temporal CLI for minutes).
  onShutdown(stop);

  const embeddedDb = !env.DATABASE_URL;
  const embeddedBus = !env.AMQP_URL;
  const databaseUrl = env.DATABASE_URL || pgliteUrl(path.join(dataDir, 'pglite'));
  const amqpUrl = env.AMQP_URL || memoryBusUrl(`tgs-dev-${process.pid}`);

  let temporal: DevServer | undefined;
  let temporalAddress = env.TEMPORAL_ADDRESS;
  if (!temporalAddress) {
    console.log(`tgs dev: starting a Temporal dev server (history in ${path.join(dataDir, 'temporal.db')})`);
    temporal = await startTemporal(opts, dataDir);
    const server = temporal;
    // Nothing may outlive tgs dev, even when it dies without cleaning up.
    const kill = () => server.process.kill('SIGKILL');
    process.once('exit', kill);
    cleanups.push({
      name: 'the Temporal dev server',
      run: async () => {
        await server.stop();
        process.off('exit', kill);
      },
    });
    server.process.once('exit', (code) => {
      if (isStopping()) return;
      console.error(`tgs dev: the Temporal dev server exited (${code}); stopping`);
      void stop().then(() => process.exit(1));
    });
    temporalAddress = temporal.address;
  }

  const token = rootAccessToken(dataDir);
  const config = loadConfig(env, { databaseUrl, amqpUrl, temporalAddress, rootAccessToken: token });
  if (embeddedDb) console.log(`tgs dev: embedded database (PGlite) in ${path.join(dataDir, 'pglite')}`);
  const api = await buildApi(config, { logger: logger('api') });
  cleanups.push({ name: 'the API', run: () => api.close() });
  const explicitPort = opts.port !== undefined;
  await listenApi(api, config, explicitPort ? positiveInt(opts.port as string, '--port', 1) : (rememberedPort(dataDir) ?? DEFAULT_API_PORT), explicitPort, dataDir);
  if (!env.TGS_ROOT_URL) config.rootUrl = `http://127.0.0.1:${config.port}`;

  // The bridge's queue must exist before the relay publishes: the in-process bus, like RabbitMQ, drops
  // messages no queue is bound for, and its queues start empty at every start.
  const bridge = await startBridge({ config, pool: api.deps.pool, temporal: () => api.deps.temporal.get(), log: lineLogger(logger('bridge')) });
  const unobserveBridge = observeBridge(bridge.stats);
  cleanups.push({ name: 'the bridge', run: () => (unobserveBridge(), bridge.stop()) });
  // hooks' bindings, in the process that runs the bridge (src/hooks/listener.ts), its queue there before the relay too
  const hookListener = await startHookListener({ config, pool: api.deps.pool, temporal: api.deps.temporal, log: lineLogger(logger('hooks')) });
  const unobserveHooks = observeHookListener(hookListener.stats);
  cleanups.push({ name: 'the hook listener', run: () => (unobserveHooks(), hookListener.stop()) });
  const relay = await startRelay({ config, pool: api.deps.pool, log: lineLogger(logger('relay')), temporal: () => api.deps.temporal.get() });
  const unobserveRelay = observeRelay(config.databaseUrl, api.deps.pool, relay.stats);
  cleanups.push({ name: 'the relay', run: () => (unobserveRelay(), relay.stop()) });
  // One registry in this process: API, relay, bridge and scheduler worker metrics on one port.
  const metrics = config.metricsPort > 0 ? await startMetricsServer({ port: config.metricsPort, host: config.host, log: logger('metrics') }) : undefined;
  if (metrics) cleanups.push({ name: 'the metrics server', run: () => metrics.close() });
  await ensureSearchAttributes(config);
  // Graphs started directly on Temporal act as a client limited to what dev graphs need, never as root.
  let temporalScopes: string[] | undefined;
  if (!config.temporalClientId) {
    config.temporalClientId = DEV_TEMPORAL_CLIENT_ID;
    temporalScopes = await ensureDevTemporalClient(api.deps.pool, config, DEV_PROVISIONER_ID);
  }
  const workerLog = logger('scheduler-worker');
  // The worker's bundling and state lines are noise here; warnings and errors still show (all of them at debug).
  await installTemporalRuntime({ log: workerLog, metrics: metrics !== undefined, minLevel: ['debug', 'trace'].includes(workerLog.level) ? workerLog.level : 'warn' });
  const { worker, connection } = await createSchedulerWorker({ config, pool: api.deps.pool, log: workerLog });
  const running = worker.run();
  cleanups.push({
    name: 'the scheduler worker',
    run: async () => {
      // the SDK stops its worker on SIGINT/SIGTERM by itself: asking a stopped one again threw "Not running. Current
      // state: STOPPED", printed as if stopping had failed
      if (worker.getState() === 'RUNNING') worker.shutdown();
      await running;
      await connection.close();
    },
  });

  const root = { clientId: ROOT_CLIENT_ID, accessToken: token };
  // Never root: a task that got hold of its worker's credentials would hold only these scopes.
  let workerCredentials: TgsCredentials | undefined;
  if (workers > 0) {
    const c = await ensureStaticClient(api.deps.pool, DEV_WORKER_CLIENT_ID, DEV_WORKER_SCOPES, `tgs dev --workers: claims ${DEV_PROVISIONER_ID}/${DEV_WORKER_TYPE} tasks`);
    workerCredentials = { clientId: c.clientId, accessToken: c.accessToken };
  }
  const shellWorkers: ShellWorker[] = [];
  for (let i = 1; i <= workers; i++) {
    const w = startShellWorker({
      rootUrl: config.rootUrl,
      credentials: workerCredentials,
      provisionerId: DEV_PROVISIONER_ID,
      workerType: DEV_WORKER_TYPE,
      capacity: 1,
      workerGroup: DEV_WORKER_GROUP,
      workerId: `dev-${process.pid}-${i}`.slice(0, 38),
      isolation: opts.isolation as IsolationMode | undefined,
      // README's first command must work on a fresh machine: without bwrap or root, run unsandboxed and say so
      fallbackToNone: true,
      network: opts.network as NetworkMode | undefined,
      fallbackToHostNetwork: true,
      log: lineLogger(logger('shell-worker').child({ worker: i })),
    });
    w.done.catch((err: unknown) => console.error(`tgs dev: shell worker ${i} stopped: ${(err as Error).message}`));
    shellWorkers.push(w);
  }
  if (shellWorkers.length > 0) cleanups.push({ name: 'the shell workers', run: async () => void (await Promise.all(shellWorkers.map((w) => w.stop()))) });

  const signIn = `${config.rootUrl}/ui/#signin?clientId=${encodeURIComponent(ROOT_CLIENT_ID)}&accessToken=${encodeURIComponent(token)}`;
  console.log('');
  console.log(`  API            ${config.rootUrl}/api/queue/v1  ${config.rootUrl}/api/scheduler/v1`);
  console.log(`  UI             ${config.rootUrl}/ui/`);
  console.log(`  UI sign-in     ${signIn}`);
  if (temporal?.uiPort) console.log(`  Temporal UI    http://127.0.0.1:${temporal.uiPort}`);
  const temporalCli = findTemporalCli();
  if (temporalCli) console.log(`  Temporal CLI   ${temporalCli} workflow list --address ${temporalAddress}${config.temporalNamespace === 'default' ? '' : ` --namespace ${config.temporalNamespace}`}`);
  if (metrics) console.log(`  metrics        ${metrics.url}/metrics`);
  console.log(
    `  Temporal       ${temporalAddress} (${temporal ? 'dev server started by tgs dev' : 'TEMPORAL_ADDRESS'}; namespace ${config.temporalNamespace}, task queue ${config.temporalTaskQueue})`,
  );
  console.log(`  Temporal graphs act as client ${config.temporalClientId}${temporalScopes ? ` (scopes ${temporalScopes.join(' ')})` : ' (TGS_TEMPORAL_CLIENT_ID)'}`);
  console.log(`  database       ${embeddedDb ? `embedded PGlite in ${path.join(dataDir, 'pglite')}` : `${safeUrl(databaseUrl)} (DATABASE_URL)`}`);
  console.log(`  messages       ${embeddedBus ? 'in-process message bus' : `${safeBusUrl(amqpUrl)} (AMQP_URL)`}`);
  console.log(
    `  workers        ${workers} shell worker(s) for ${DEV_PROVISIONER_ID}/${DEV_WORKER_TYPE}${workers === 0 ? ' (add some with --workers N, or run tgs shell-worker)' : ` as client ${DEV_WORKER_CLIENT_ID} (${DEV_WORKER_SCOPES.join(', ')})`}`,
  );
  console.log('  credentials    (for tgs commands in another shell)');
  console.log(`    export TGS_ROOT_URL=${config.rootUrl}`);
  console.log(`    export TGS_CLIENT_ID=${ROOT_CLIENT_ID}`);
  console.log(`    export TGS_ACCESS_TOKEN=${token}`);
  console.log('');
  console.log('tgs dev is running; Ctrl-C stops everything.');

  if (opts.submit.length > 0) {
    const client = new TgsClient({ rootUrl: config.rootUrl, credentials: root });
    // Output lines carry the file name; `examples/<name>/graph.yaml` files share theirs, so those get the directory too.
    const names = opts.submit.map((file) => path.basename(file));
    const label = (file: string, i: number) => (names.filter((n) => n === names[i]).length > 1 ? path.join(path.basename(path.dirname(path.resolve(file))), names[i]) : names[i]);
    const ends = await Promise.all(opts.submit.map((file, i) => submitAndWatch(client, file, label(file, i), isStopping)));
    if (opts.exit && !isStopping()) {
      const ok = ends.every((e) => e === 'finished');
      console.log(`tgs dev: ${ok ? 'every graph finished' : 'not every graph finished'}; stopping (--exit)`);
      await stop();
      process.exit(ok ? 0 : 1);
    }
  }
}
