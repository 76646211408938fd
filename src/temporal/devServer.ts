import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, readlinkSync } from 'node:fs';
import { connect, createServer } from 'node:net';
import { homedir } from 'node:os';
import path from 'node:path';
import { temporalCliFromEnv } from '../config.js';
import { SEARCH_ATTRIBUTES } from '../workflows/contract.js';

/** The Temporal CLI version tgs builds when none is found; it embeds server 1.29.1. */
export const TEMPORAL_CLI_VERSION = 'v1.5.1';
export const temporalCacheDir = path.join(process.env.XDG_CACHE_HOME || path.join(homedir(), '.cache'), 'tgs', 'bin');

/** TEMPORAL_CLI, then `temporal` on PATH, then the tgs cache. */
export function findTemporalCli(): string | undefined {
  const fromEnv = temporalCliFromEnv();
  if (fromEnv && existsSync(fromEnv)) return fromEnv;
  const which = spawnSync('sh', ['-c', 'command -v temporal'], { encoding: 'utf8' });
  if (which.status === 0 && which.stdout.trim()) return which.stdout.trim();
  const cached = path.join(temporalCacheDir, 'temporal');
  return existsSync(cached) ? cached : undefined;
}

/**
 * Finds the Temporal CLI or builds it from the Go module proxy into the cache (about 6 minutes on a
 * 2-core machine; needs `go`). Prints what it does, because a silent 6-minute wait looks like a hang.
 */
export function ensureTemporalCli(log: (line: string) => void = (l) => console.error(l)): string {
  const found = findTemporalCli();
  if (found) return found;
  const go = spawnSync('sh', ['-c', 'command -v go'], { encoding: 'utf8' });
  if (go.status !== 0) {
    throw new Error(
      'No Temporal CLI found (TEMPORAL_CLI, PATH, or ' + temporalCacheDir + ') and no Go toolchain to build one. ' +
        'Install the Temporal CLI (https://docs.temporal.io/cli) or Go, or set TEMPORAL_ADDRESS to an existing server.',
    );
  }
  mkdirSync(temporalCacheDir, { recursive: true });
  log(`tgs: no Temporal CLI found; building temporal ${TEMPORAL_CLI_VERSION} from source into ${temporalCacheDir}`);
  log('tgs: this happens once and takes about 6 minutes on a 2-core machine...');
  const started = Date.now();
  const result = spawnSync('go', ['install', `github.com/temporalio/cli/cmd/temporal@${TEMPORAL_CLI_VERSION}`], {
    stdio: ['ignore', 'inherit', 'inherit'],
    env: { ...process.env, GOBIN: temporalCacheDir },
  });
  if (result.status !== 0) throw new Error(`building the Temporal CLI failed (go install exited ${result.status})`);
  log(`tgs: built the Temporal CLI in ${Math.round((Date.now() - started) / 1000)} s`);
  return path.join(temporalCacheDir, 'temporal');
}

/**
 * A port nothing listens on. The probe's port is left with a connection in TIME_WAIT, closed from the listening
 * side: Linux hands out ephemeral ports at random and could give the same one to another process's probe a moment
 * later (two test files then started Temporal servers on one port, and one file's stack talked to the other's
 * server), but it does not allocate a port for `listen(0)` while a connection on it is in TIME_WAIT, and an
 * explicit bind with SO_REUSEADDR (Node and Go set it) still succeeds. The Temporal CLI picks its own ports the
 * same way.
 */
export async function freePort(preferred?: number): Promise<number> {
  const tryPort = (port: number) =>
    new Promise<number | undefined>((resolve) => {
      const server = createServer((socket) => socket.destroy());
      server.once('error', () => resolve(undefined));
      server.listen(port, '127.0.0.1', () => {
        const address = server.address();
        const bound = typeof address === 'object' && address ? address.port : undefined;
        if (bound === undefined) return server.close(() => resolve(undefined));
        // the server side closes first, so the TIME_WAIT is on the probed port's side
        const client = connect(bound, '127.0.0.1');
        const done = () => server.close(() => resolve(bound));
        client.once('close', done);
        client.once('error', () => client.destroy());
      });
    });
  if (preferred !== undefined) {
    const port = await tryPort(preferred);
    if (port !== undefined) return port;
  }
  const port = await tryPort(0);
  if (port === undefined) throw new Error('no free port');
  return port;
}

/**
 * Whether process `pid` holds the socket listening on 127.0.0.1:`port`, read from /proc; undefined where there is
 * no /proc to read. A server that lost its port to another process must not be taken for the one answering there.
 */
export function listensOn(pid: number, port: number): boolean | undefined {
  try {
    const inodes = listeningInodes(port);
    for (const fd of readdirSync(`/proc/${pid}/fd`)) {
      const target = readlinkSafe(`/proc/${pid}/fd/${fd}`);
      if (target?.startsWith('socket:[') && inodes.has(target.slice('socket:['.length, -1))) return true;
    }
    return false;
  } catch {
    return undefined;
  }
}

/** The inodes of the sockets listening on `port` (any address), from /proc/net/tcp and tcp6 (throws without /proc). */
export function listeningInodes(port: number): Set<string> {
  const inodes = new Set<string>();
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    if (!existsSync(table)) continue;
    for (const line of readFileSync(table, 'utf8').split('\n').slice(1)) {
      const fields = line.trim().split(/\s+/);
      // local_address is HEXIP:HEXPORT; state 0A is LISTEN; field 9 is the socket's inode
      if (fields.length > 9 && fields[3] === '0A' && parseInt(fields[1].split(':')[1], 16) === port) inodes.add(fields[9]);
    }
  }
  return inodes;
}

export function readlinkSafe(file: string): string | undefined {
  try {
    return readlinkSync(file);
  } catch {
    return undefined;
  }
}

export interface DevServer {
  address: string;
  port: number;
  uiPort: number | undefined;
  process: ChildProcess;
  stop(): Promise<void>;
}

export interface DevServerOptions {
  port?: number;
  /** Web UI port; omit (or headless) for none. */
  uiPort?: number;
  headless?: boolean;
  /** Keep state in this sqlite file; in memory when omitted. */
  dbFilename?: string;
  searchAttributes?: Record<string, 'Keyword' | 'Text' | 'Int' | 'Double' | 'Bool' | 'Datetime' | 'KeywordList'>;
  dynamicConfig?: Record<string, string | number | boolean>;
  log?: (line: string) => void;
}

/** The workflow's search attributes (src/workflows/contract.ts) as a dev server registers them at start. */
export const TGS_SEARCH_ATTRIBUTES: Record<string, 'Keyword'> = Object.fromEntries(
  Object.values(SEARCH_ATTRIBUTES).map((key) => [key.name, 'Keyword' as const]),
);

/**
 * Dynamic config every dev server of tgs gets (tgs dev, the tests, the bench); deploy/temporal-dynamicconfig.yaml
 * gives the compose deployment's server the same (test/deploy/compose.test.ts keeps the two equal).
 */
export const DEFAULT_DYNAMIC_CONFIG: Record<string, string | number | boolean> = {
  // Activity eager execution: a regular activity starts in the worker that scheduled it, without a poll.
  'system.enableActivityEagerExecution': true,
  // A dev server has one history shard, and each shard reads its transfer queue (the tasks that hand a new
  // workflow or activity task to matching) at most 20 times a second by default. Past that burst, a signal to an
  // idle workflow waited 20-28 ms for its workflow task here: a dependency hop took 44 ms p50 instead of 24, and
  // the bare signal → activity floor 50 ms instead of 10-12. Production clusters spread graphs over hundreds of
  // shards; one shard needs the higher rate. The 10,000-task graph's CPU per task did not move (docs/bench-journal/2026-11-24.md).
  'history.transferProcessorMaxPollRPS': 1000,
};

/**
 * Starts `temporal server start-dev` and resolves once its frontend accepts connections. The server binds more
 * ports than the ones given here (its history, matching and worker services), and another process can take one
 * of them first (seen with several test files starting servers at once): when no port was asked for, such a
 * start is tried again, up to three times, on other ports.
 */
export async function startDevServer(options: DevServerOptions = {}): Promise<DevServer> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await startDevServerOnce(options);
    } catch (err) {
      if (options.port !== undefined || attempt >= 3 || !/address already in use/.test((err as Error).message)) throw err;
    }
  }
}

async function startDevServerOnce(options: DevServerOptions): Promise<DevServer> {
  const cli = ensureTemporalCli(options.log);
  const port = options.port ?? (await freePort());
  const args = ['server', 'start-dev', '--ip', '127.0.0.1', '--port', String(port), '--log-level', 'error'];
  let uiPort: number | undefined;
  if (options.headless ?? options.uiPort === undefined) {
    args.push('--headless');
  } else {
    uiPort = options.uiPort;
    args.push('--ui-port', String(uiPort));
  }
  // The dev server's own HTTP and metrics ports default to fixed numbers; pick free ones so that
  // several servers (test files, two `tgs dev`) can run side by side.
  args.push('--http-port', String(await freePort()), '--metrics-port', String(await freePort()));
  if (options.dbFilename) args.push('--db-filename', options.dbFilename);
  for (const [name, type] of Object.entries(options.searchAttributes ?? {})) args.push('--search-attribute', `${name}=${type}`);
  for (const [key, value] of Object.entries({ ...DEFAULT_DYNAMIC_CONFIG, ...options.dynamicConfig })) {
    args.push('--dynamic-config-value', `${key}=${JSON.stringify(value)}`);
  }
  const child = spawn(cli, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let output = '';
  const collect = (chunk: Buffer) => {
    output = (output + chunk.toString()).slice(-4000);
  };
  child.stdout?.on('data', collect);
  child.stderr?.on('data', collect);
  const address = `127.0.0.1:${port}`;
  const deadline = Date.now() + 60_000;
  const { Connection } = await import('@temporalio/client');
  for (;;) {
    if (child.exitCode !== null) throw new Error(`temporal dev server exited with ${child.exitCode}: ${output}`);
    let answered = false;
    try {
      const connection = await Connection.connect({ address, connectTimeout: 1000 });
      await connection.workflowService.getSystemInfo({});
      await connection.close();
      answered = true;
    } catch {
      // not up yet
    }
    // What answers may be another server: one that took the port between the probe and this server's bind.
    // This server then exits with "address already in use", which the caller retries on another port.
    if (answered && (child.pid === undefined || listensOn(child.pid, port) !== false)) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`temporal dev server did not start within 60 s${answered ? ` (127.0.0.1:${port} is served by another process)` : ''}: ${output}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    address,
    port,
    uiPort,
    process: child,
    async stop() {
      if (child.exitCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 5000);
      await exited;
      clearTimeout(timer);
    },
  };
}
