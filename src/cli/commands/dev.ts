import type { Command } from 'commander';
import { chmodSync, existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import slugid from 'slugid';
import { loadConfig, ROOT_CLIENT_ID, type Config } from '../../config.js';
import { buildApi, type ApiApp } from '../../api/app.js';
import { startRelay } from '../../exchanges/relay.js';
import { startBridge } from '../../bridge/bridge.js';
import { memoryBusUrl } from '../../exchanges/bus.js';
import { pgliteUrl } from '../../db/pglite.js';
import { acquireDirLock } from '../../db/pgliteLock.js';
import { DefaultLogger, Runtime } from '@temporalio/worker';
import { createSchedulerWorker, ensureSearchAttributes } from '../../worker.js';
import { freePort, startDevServer, type DevServer } from '../../temporal/devServer.js';
import { generateAccessToken } from '../../auth/clients.js';
import { GraphNotFinishedError, TgsApiError, TgsClient, type TaskGraph } from '../../client/tgsClient.js';
import { Progress, readGraphFile, withTaskDefaults } from './graph.js';
import { LIVE_LOG, startShellWorker, type ShellWorker } from '../../shellWorker/index.js';
import { onShutdown } from '../shutdown.js';

/** Where `tgs dev --workers N` workers take their tasks from; graphs for them use these. */
export const DEV_PROVISIONER_ID = 'tgs-dev';
export const DEV_WORKER_TYPE = 'shell';

export interface DevOptions {
  port: string;
  temporalPort: string;
  uiPort: string;
  dataDir: string;
  workers: string;
  submit: string[];
  exit?: boolean;
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

/** The root access token of this data directory: kept across restarts so exported credentials keep working. */
function rootAccessToken(dataDir: string): string {
  if (process.env.TGS_ROOT_ACCESS_TOKEN) return process.env.TGS_ROOT_ACCESS_TOKEN;
  const file = path.join(dataDir, 'root-access-token');
  if (existsSync(file)) {
    const token = readFileSync(file, 'utf8').trim();
    if (token) return token;
  }
  const token = generateAccessToken();
  writeFileSync(file, `${token}\n`, { mode: 0o600 });
  chmodSync(file, 0o600);
  return token;
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
        searchAttributes: { TaskGraphState: 'Keyword', TaskGraphSchedulerId: 'Keyword' },
        log: (line) => console.log(line),
      });
    } catch (err) {
      if (attempt >= 3 || !/address already in use|bind/i.test((err as Error).message)) throw err;
      port = await freePort();
      uiPort = await freePort();
    }
  }
}

/** Listens on the preferred port, or on a free one when it is taken (also when taken meanwhile). */
async function listenApi(api: ApiApp, config: Config, preferred: number): Promise<string> {
  config.port = await freePort(preferred);
  for (let attempt = 1; ; attempt++) {
    try {
      return await api.listen();
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'EADDRINUSE' || attempt >= 3) throw err;
      config.port = await freePort();
    }
  }
}

type GraphEnd = 'finished' | 'blocked' | 'canceled' | 'failed';

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
    .option('--port <port>', 'API port (taken: a free one is used)', '8080')
    .option('--temporal-port <port>', 'Temporal dev server port (taken: a free one is used)', '7233')
    .option('--ui-port <port>', 'Temporal Web UI port (taken: a free one is used)', '8233')
    .option('--data-dir <dir>', 'state of this instance: embedded database, Temporal history, root token (one tgs dev per directory)', '.tgs')
    .option('--workers <n>', `shell workers to run in-process (provisionerId ${DEV_PROVISIONER_ID}, workerType ${DEV_WORKER_TYPE})`, '0')
    .option('--submit <file>', 'once started, submit this task graph (JSON or YAML) and show its progress; repeatable', (v: string, all: string[]) => [...all, v], [] as string[])
    .option('--exit', 'with --submit: stop everything when the graphs are done (exit 0 if all finished, else 1)')
    .action(async (opts: DevOptions) => {
      const cleanups: { name: string; run: () => Promise<void> }[] = [];
      let stopping: Promise<void> | undefined;
      const stop = () =>
        (stopping ??= (async () => {
          for (const { name, run } of cleanups.reverse()) {
            await run().catch((err: unknown) => console.error(`tgs dev: stopping ${name}: ${(err as Error).message}`));
          }
        })());
      try {
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
  const apiPreferred = positiveInt(opts.port, '--port', 1);
  const dataDir = path.resolve(opts.dataDir);
  mkdirSync(dataDir, { recursive: true });
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
  const api = await buildApi(config);
  cleanups.push({ name: 'the API', run: () => api.close() });
  await listenApi(api, config, apiPreferred);
  if (!env.TGS_ROOT_URL) config.rootUrl = `http://127.0.0.1:${config.port}`;

  // The bridge's queue must exist before the relay publishes: the in-process bus, like RabbitMQ, drops
  // messages no queue is bound for, and its queues start empty at every start.
  const bridge = await startBridge({ config, pool: api.deps.pool, temporal: () => api.deps.temporal.get(), log: (l) => console.log(l) });
  cleanups.push({ name: 'the bridge', run: () => bridge.stop() });
  const relay = await startRelay({ config, pool: api.deps.pool, log: (l: string) => console.log(`relay: ${l}`) });
  cleanups.push({ name: 'the relay', run: () => relay.stop() });
  await ensureSearchAttributes(config);
  // The worker's bundling and state lines are noise here; warnings and errors still show.
  Runtime.install({ logger: new DefaultLogger('WARN') });
  const { worker, connection } = await createSchedulerWorker({ config, pool: api.deps.pool });
  const running = worker.run();
  cleanups.push({
    name: 'the scheduler worker',
    run: async () => {
      worker.shutdown();
      await running;
      await connection.close();
    },
  });

  const root = { clientId: ROOT_CLIENT_ID, accessToken: token };
  const shellWorkers: ShellWorker[] = [];
  for (let i = 1; i <= workers; i++) {
    const w = startShellWorker({
      rootUrl: config.rootUrl,
      credentials: root,
      provisionerId: DEV_PROVISIONER_ID,
      workerType: DEV_WORKER_TYPE,
      capacity: 1,
      workerGroup: 'tgs-dev',
      workerId: `dev-${process.pid}-${i}`.slice(0, 38),
      log: (line) => console.log(`worker ${i}: ${line}`),
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
  console.log(
    `  Temporal       ${temporalAddress} (${temporal ? 'dev server started by tgs dev' : 'TEMPORAL_ADDRESS'}; namespace ${config.temporalNamespace}, task queue ${config.temporalTaskQueue})`,
  );
  console.log(`  database       ${embeddedDb ? `embedded PGlite in ${path.join(dataDir, 'pglite')}` : `${safeUrl(databaseUrl)} (DATABASE_URL)`}`);
  console.log(`  messages       ${embeddedBus ? 'in-process message bus' : `${safeUrl(amqpUrl)} (AMQP_URL)`}`);
  console.log(`  workers        ${workers} shell worker(s) for ${DEV_PROVISIONER_ID}/${DEV_WORKER_TYPE}${workers === 0 ? ' (add some with --workers N, or run tgs shell-worker)' : ''}`);
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
