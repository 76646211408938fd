import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, readdirSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { startStack, eventually, stackEnv, type Stack } from '../support/stack.js';
import { freePort } from '../src/temporal/devServer.js';
import { ApiClient } from '../src/client/http.js';
import type { BenchStack } from './scenario.js';

interface TgsProcess {
  name: string;
  child: ChildProcess;
}

function rssMb(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : NaN;
  } catch {
    return NaN;
  }
}

/**
 * The tgs processes run as deployed: the built CLI (bin/tgs.js → dist/), what `npm install` and the Docker image run.
 * Through tsx each was ~70 MB larger (an idle API: 192 against 124 MB), which the peak-RSS goal would count, and the
 * scheduler worker bundled its workflow code during the first run of new sources. A dist/ older than any file of
 * src/ is rebuilt first.
 */
function ensureBuilt(log: (line: string) => void) {
  const builtAt = (path: string) => {
    try {
      return statSync(path).mtimeMs;
    } catch {
      return 0;
    }
  };
  const built = Math.min(builtAt('dist/cli/main.js'), builtAt('dist/workflow-bundle.js'));
  const stale = readdirSync('src', { recursive: true, encoding: 'utf8' }).find((f) => builtAt(join('src', f)) > built);
  if (built > 0 && stale === undefined) return;
  log(built === 0 ? 'dist/ is missing: npm run build (about a minute)' : `src/${stale} is newer than dist/: npm run build (about a minute)`);
  execFileSync('npm', ['run', 'build'], { stdio: ['ignore', 'ignore', 'inherit'] });
}

function spawnTgs(stack: Stack, command: string, log: (line: string) => void, env: Record<string, string> = {}): TgsProcess {
  const profile = process.env.TGS_BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir', process.env.TGS_BENCH_PROFILE] : [];
  const child = spawn(process.execPath, [...profile, 'bin/tgs.js', command], {
    env: {
      ...process.env,
      ...stackEnv(stack),
      TGS_ROOT_ACCESS_TOKEN: stack.api.root.accessToken,
      TGS_CLAIM_TIMEOUT: String(stack.config.claimTimeoutSeconds),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let tail = '';
  const keep = (d: Buffer) => {
    tail = (tail + d.toString()).slice(-2000);
    if (process.env.TGS_BENCH_VERBOSE) process.stderr.write(`[${command}] ${d}`);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  child.once('exit', (code, signal) => {
    if (code !== 0 && signal !== 'SIGTERM') log(`${command} exited (${code ?? signal}): ${tail}`);
  });
  return { name: command, child };
}

async function stopProcesses(processes: TgsProcess[]) {
  await Promise.all(processes.map(({ child }) => new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode) return resolve(null);
    child.once('exit', resolve);
    child.kill('SIGTERM');
  })));
}

/** The API, bridge, scheduler worker and relay as `tgs` processes; returns the API's rootUrl. */
async function startProcesses(stack: Stack, processes: TgsProcess[], log: (line: string) => void): Promise<string> {
  const port = await freePort();
  const rootUrl = `http://127.0.0.1:${port}`;
  processes.push(spawnTgs(stack, 'api', log, { PORT: String(port), HOST: '127.0.0.1', TGS_ROOT_URL: rootUrl }));
  processes.push(spawnTgs(stack, 'bridge', log));
  processes.push(spawnTgs(stack, 'scheduler-worker', log));
  processes.push(spawnTgs(stack, 'relay', log));
  await eventually(async () => (await fetch(`${rootUrl}/api/queue/v1/ping`)).ok, 'tgs api process answering', 60_000);
  return rootUrl;
}

/**
 * The stack the scenarios run on. With `separateProcesses` (the default of bench/run.ts) the API, the bridge, the
 * scheduler worker and the relay run as their own `tgs` processes, as in a deployment: each gets its own peak RSS, and they
 * use both cores; the scenarios talk to that API and the stack's own stays idle. Otherwise they run in this one.
 */
export async function startBenchStack(options: { separateProcesses: boolean; postgresUrl?: string; log: (line: string) => void }): Promise<BenchStack> {
  const { separateProcesses, log } = options;
  if (separateProcesses) ensureBuilt(log);
  const stack = await startStack({
    // the stack's own (idle) API sweeps at the production interval, not the tests' 200 ms
    configOverrides: { claimTimeoutSeconds: 600, sweepIntervalMs: 5000 },
    inProcessBridge: !separateProcesses,
    inProcessWorker: !separateProcesses,
    inProcessRelay: !separateProcesses,
    postgresUrl: options.postgresUrl,
  });
  const processes: TgsProcess[] = [];
  if (separateProcesses) {
    const rootUrl = await startProcesses(stack, processes, log);
    stack.api.rootUrl = rootUrl;
    stack.root = new ApiClient(rootUrl, stack.api.root);
  }
  const stopStack = stack.stop;
  return Object.assign(stack, {
    log,
    processNames() {
      const names = new Map<number, string>(processes.map((p) => [p.child.pid as number, `tgs ${p.name}`]));
      names.set(process.pid, separateProcesses ? 'bench (fast worker)' : 'tgs (all) + bench');
      // the stack's own dev server: other test runs on the machine start theirs (bench/cpu.ts counts only this one)
      if (stack.temporal.process?.pid) names.set(stack.temporal.process.pid, 'temporal');
      return names;
    },
    maxRssMb() {
      const temporal = { 'temporal dev server': rssMb(stack.temporal.process?.pid as number) };
      return separateProcesses
        ? { ...Object.fromEntries(processes.map((p) => [`tgs ${p.name}`, rssMb(p.child.pid as number)])), 'bench (fast worker, graph builder)': rssMb(process.pid), ...temporal }
        : { 'tgs (api+relay+bridge+worker in one process)': rssMb(process.pid), ...temporal };
    },
    async stop() {
      await stopProcesses(processes);
      await stopStack();
    },
  });
}
