import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import path from 'node:path';

export type TgsCommand = 'api' | 'relay' | 'bridge' | 'scheduler-worker';
export const tgsCommands: TgsCommand[] = ['api', 'relay', 'bridge', 'scheduler-worker'];

/** The line each command prints once it serves (the relay says so only when it becomes the active one). */
const readyLine: Record<TgsCommand, RegExp> = {
  api: /listening on/,
  relay: /relay: active/,
  bridge: /bridge: consuming/,
  'scheduler-worker': /tgs scheduler-worker: task queue/,
};

export interface Exit {
  at: number;
  code: number | null;
  signal: NodeJS.Signals | null;
  /** the harness asked for it (a fault or the end of the run) */
  expected: boolean;
}

/**
 * One `tgs <command>` process as a supervisor runs it: started from source (as bench/run.ts does), its
 * output appended to `<logDir>/<name>.log`, killed and started again on request. An exit the harness did
 * not cause is recorded: a process that dies by itself under a fault is a finding.
 */
export class Supervised {
  child: ChildProcess | undefined;
  readonly exits: Exit[] = [];
  private expecting = false;
  private log: WriteStream;
  private startedAt = 0;
  private closed = false;
  /** how long a process that died by itself stays down before the supervisor starts it again */
  restartDelayMs = 2000;
  /** when the current process printed its ready line */
  readyAt: number | undefined;

  constructor(
    readonly name: string,
    readonly command: TgsCommand,
    private readonly env: Record<string, string>,
    logDir: string,
  ) {
    this.log = createWriteStream(path.join(logDir, `${name}.log`), { flags: 'a' });
  }

  start(): void {
    this.expecting = false;
    this.log.write(`--- ${new Date().toISOString()} start\n`);
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', this.command], {
      env: { ...process.env, ...this.env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.startedAt = Date.now();
    this.readyAt = undefined;
    const watch = (d: Buffer) => {
      if (this.readyAt === undefined && this.child === child && readyLine[this.command].test(d.toString())) this.readyAt = Date.now();
    };
    child.stdout?.on('data', watch);
    child.stderr?.on('data', watch);
    child.stdout?.pipe(this.log, { end: false });
    child.stderr?.pipe(this.log, { end: false });
    child.once('exit', (code, signal) => {
      this.exits.push({ at: Date.now(), code, signal, expected: this.expecting });
      this.log.write(`--- ${new Date().toISOString()} exit ${code ?? signal}${this.expecting ? '' : ' (unexpected)'}\n`);
      if (this.child === child) this.child = undefined;
      // as systemd's Restart=always or a Kubernetes pod would: a process that died by itself comes back
      if (!this.expecting && !this.closed) setTimeout(() => !this.closed && !this.running && this.start(), this.restartDelayMs);
    });
    this.child = child;
  }

  get running(): boolean {
    return this.child !== undefined && this.child.exitCode === null && !this.child.signalCode;
  }

  /** Sends the signal and waits for the exit (SIGTERM falls back to SIGKILL after graceMs). */
  async stop(signal: 'SIGKILL' | 'SIGTERM', graceMs = 30_000): Promise<{ exitedAfterMs: number; code: number | null; signal: NodeJS.Signals | null }> {
    const child = this.child;
    const t0 = Date.now();
    if (!child || child.exitCode !== null || child.signalCode) return { exitedAfterMs: 0, code: child?.exitCode ?? null, signal: child?.signalCode ?? null };
    this.expecting = true;
    const exited = new Promise<[number | null, NodeJS.Signals | null]>((resolve) => child.once('exit', (code, sig) => resolve([code, sig])));
    child.kill(signal);
    const timer = signal === 'SIGTERM' ? setTimeout(() => child.kill('SIGKILL'), graceMs) : undefined;
    const [code, sig] = await exited;
    clearTimeout(timer);
    return { exitedAfterMs: Date.now() - t0, code, signal: sig };
  }

  /** ms from the latest start to its ready line, waiting up to timeoutMs; undefined if it did not say. */
  async waitReady(timeoutMs: number): Promise<number | undefined> {
    const deadline = Date.now() + timeoutMs;
    while (this.readyAt === undefined && Date.now() < deadline && this.running) await new Promise((r) => setTimeout(r, 100));
    return this.readyAt === undefined ? undefined : this.readyAt - this.startedAt;
  }

  unexpectedExits(): Exit[] {
    return this.exits.filter((e) => !e.expected);
  }

  /** no restart from here on (the run is ending) */
  closing(): void {
    this.closed = true;
  }

  close(): void {
    this.closed = true;
    this.log.end();
  }
}

/** Two copies of every tgs process, as a deployment runs them. */
export class Fleet {
  readonly processes = new Map<string, Supervised>();

  constructor(baseEnv: Record<string, string>, apiPorts: [number, number], logDir: string) {
    for (const command of tgsCommands) {
      for (const copy of [1, 2] as const) {
        const env: Record<string, string> = { ...baseEnv };
        if (command === 'api') {
          env.PORT = String(apiPorts[copy - 1]);
          env.HOST = '127.0.0.1';
          env.TGS_ROOT_URL = `http://127.0.0.1:${apiPorts[copy - 1]}`;
        }
        const name = `${command}-${copy}`;
        this.processes.set(name, new Supervised(name, command, env, logDir));
      }
    }
  }

  get(name: string): Supervised {
    const p = this.processes.get(name);
    if (!p) throw new Error(`no process ${name}`);
    return p;
  }

  startAll(): void {
    for (const p of this.processes.values()) p.start();
  }

  async stopAll(): Promise<void> {
    for (const p of this.processes.values()) p.closing();
    await Promise.all([...this.processes.values()].map((p) => p.stop('SIGTERM', 10_000)));
    for (const p of this.processes.values()) p.close();
  }
}
