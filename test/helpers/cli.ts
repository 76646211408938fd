// `tgs <args>` from source as a real process, for the CLI tests.
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startShellWorker, type ShellWorker } from '../../src/shellWorker/index.js';
import type { StackFixture } from './stackFixture.js';

export const repo = fileURLToPath(new URL('../..', import.meta.url));

export interface CliRun {
  code: number;
  stdout: string;
  stderr: string;
}

export interface CliOptions {
  /** sees the output so far each time more arrives on stdout */
  onStdout?: (soFar: string) => void;
  /** killed (and answered with what it printed) after this long; default 120 s */
  timeoutMs?: number;
  cwd?: string;
  /** stops the command (SIGTERM) once its stdout so far matches */
  stopWhen?: (soFar: string) => boolean;
}

/** `tgs <args>` with only the variables given (plus PATH and HOME for node); stdout is a pipe, not a TTY. */
export function runTgs(args: string[], env: Record<string, string>, options: CliOptions = {}): Promise<CliRun> {
  return new Promise((resolve) => {
    let soFar = '';
    const child = execFile(
      process.execPath,
      ['--import', 'tsx', `${repo}/src/cli/entry.ts`, ...args],
      { cwd: options.cwd ?? repo, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, timeout: options.timeoutMs ?? 120_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdout?.on('data', (d: Buffer) => {
      soFar += d.toString();
      options.onStdout?.(soFar);
      if (options.stopWhen?.(soFar)) child.kill('SIGTERM');
    });
  });
}

/**
 * A shell worker on the stack for a CLI test file, claiming tgs-test/<workerType> unsandboxed (the tests hold and
 * release tasks through files in `dir`, which only unsandboxed runs share), and a directory for the file's graphs.
 */
export function useShellWorker(stack: StackFixture, workerType: string): { readonly dir: string } {
  let worker: ShellWorker | undefined;
  let dir: string | undefined;
  stack.onStart(async () => {
    dir = mkdtempSync(path.join(tmpdir(), `tgs-cli-${workerType}-`));
    worker = startShellWorker({
      rootUrl: stack.api.rootUrl,
      credentials: stack.api.root,
      provisionerId: 'tgs-test',
      workerType,
      capacity: 4,
      logIntervalMs: 300,
      log: () => undefined,
      isolation: 'none',
    });
  });
  stack.onStop(async () => {
    await worker?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });
  return {
    get dir() {
      if (!dir) throw new Error('useShellWorker: read before the stack started');
      return dir;
    },
  };
}
