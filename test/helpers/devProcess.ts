import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { freePort } from '../../src/temporal/devServer.js';

export interface DevProcess {
  child: ChildProcess;
  /** everything it printed so far (stdout and stderr) */
  output(): string;
  /** the values of its start banner, once it printed "tgs dev is running" */
  rootUrl: string;
  accessToken: string;
  clientId: string;
  temporalAddress: string;
  /** SIGINT, then the exit code (SIGKILL and a failure after 60 s) */
  interrupt(): Promise<number | null>;
}

/** Direct children of a process: `[{pid, command}]`. */
export function childrenOf(pid: number): { pid: number; command: string }[] {
  const ps = spawnSync('ps', ['-o', 'pid=,comm=', '--ppid', String(pid)], { encoding: 'utf8' });
  return ps.stdout
    .split('\n')
    .map((l) => l.trim())
    .filter(Boolean)
    .map((l) => {
      const [p, ...rest] = l.split(/\s+/);
      return { pid: Number(p), command: rest.join(' ') };
    });
}

/** Live processes whose command line contains `text` (e.g. a data directory path). */
export function processesMentioning(text: string): { pid: number; args: string }[] {
  const ps = spawnSync('ps', ['-eo', 'pid=,stat=,args='], { encoding: 'utf8' });
  return ps.stdout
    .split('\n')
    .map((l) => /^\s*(\d+)\s+(\S+)\s+(.*)$/.exec(l))
    .filter((m): m is RegExpExecArray => m !== null && !m[2].startsWith('Z') && m[3].includes(text) && Number(m[1]) !== process.pid)
    .map((m) => ({ pid: Number(m[1]), args: m[3] }));
}

export function isRunning(pid: number): boolean {
  // A zombie still answers kill(0): ask ps for the state.
  const ps = spawnSync('ps', ['-o', 'stat=', '-p', String(pid)], { encoding: 'utf8' });
  const stat = ps.stdout.trim();
  return stat !== '' && !stat.startsWith('Z');
}

/** The environment of a user with no DATABASE_URL / AMQP_URL / TEMPORAL_ADDRESS, plus `extra`. */
export function embeddedEnv(extra: Record<string, string> = {}): NodeJS.ProcessEnv {
  const env = { ...process.env };
  for (const name of ['DATABASE_URL', 'AMQP_URL', 'TEMPORAL_ADDRESS', 'TGS_ROOT_URL', 'TGS_ROOT_ACCESS_TOKEN', 'PORT', 'NODE_TEST_CONTEXT']) delete env[name];
  return { ...env, ...extra };
}

/** Free ports for --port, --temporal-port and --ui-port. */
export async function devPorts(): Promise<string[]> {
  const api = await freePort();
  const temporal = await freePort();
  const ui = await freePort();
  return ['--port', String(api), '--temporal-port', String(temporal), '--ui-port', String(ui)];
}

/**
 * Spawns the real `tgs dev` (the CLI entry, as `tgs` runs it) and waits for its start banner; rejects
 * with its output when it exits first or takes over `timeoutMs`.
 */
export async function startDevProcess(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 180_000): Promise<DevProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', 'dev', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const deadline = Date.now() + timeoutMs;
  while (!out.includes('tgs dev is running')) {
    if (child.exitCode !== null) throw new Error(`tgs dev exited with ${child.exitCode} before starting:\n${out}`);
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`tgs dev did not start within ${timeoutMs} ms:\n${out}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  const grab = (re: RegExp, what: string) => {
    const m = re.exec(out);
    if (!m) throw new Error(`no ${what} in the output of tgs dev:\n${out}`);
    return m[1];
  };
  return {
    child,
    output: () => out,
    rootUrl: grab(/export TGS_ROOT_URL=(\S+)/, 'TGS_ROOT_URL'),
    clientId: grab(/export TGS_CLIENT_ID=(\S+)/, 'TGS_CLIENT_ID'),
    accessToken: grab(/export TGS_ACCESS_TOKEN=(\S+)/, 'TGS_ACCESS_TOKEN'),
    temporalAddress: grab(/^ {2}Temporal {7}(\S+)/m, 'Temporal address'),
    async interrupt() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGINT');
      const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/** Runs `tgs dev` to its end (for invocations that must fail fast), returning exit code and output. */
export function runDevToEnd(args: string[], env: NodeJS.ProcessEnv, timeoutMs = 120_000): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', 'dev', ...args], { env, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, output: out });
    });
  });
}
