import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestApi, type TestApi } from '../../support/api.js';
import { eventually } from '../../support/stack.js';
import { createTestTask } from '../helpers/queueTasks.js';
import type { ShellWorker, ShellWorkerOptions } from '../../src/shellWorker/index.js';
import { startTestShellWorker } from '../helpers/testShellWorker.js';

/*
 * Stopping a shell worker drains it: no more claims, running tasks finish (up to --drain-timeout), the rest are
 * reported worker-shutdown at once; a second signal stops at once.
 */

const repo = fileURLToPath(new URL('../..', import.meta.url));
let t: TestApi;
let workDir: string;
const workers: ShellWorker[] = [];

before(async () => {
  t = await startTestApi({ claimWorkWaitMs: 1000, claimTimeoutSeconds: 60 });
  workDir = mkdtempSync(path.join(tmpdir(), 'tgs-drain-work-'));
  chmodSync(workDir, 0o711);
});
after(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await t.close();
  rmSync(workDir, { recursive: true, force: true });
});

function worker(workerType: string, extra: Partial<ShellWorkerOptions> = {}): { w: ShellWorker; lines: string[] } {
  const { worker: w, lines } = startTestShellWorker(t, workerType, { workDir, isolation: 'none', ...extra });
  workers.push(w);
  return { w, lines };
}

const status = async (taskId: string) => (await t.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status;
const liveLog = (taskId: string) => fetch(`${t.rootUrl}/api/queue/v1/task/${taskId}/runs/0/artifacts/public/logs/live.log`).then((r) => r.text());
const running = (taskId: string) => eventually(async () => (await status(taskId)).state === 'running' && /started/.test(await liveLog(taskId)), `${taskId} running`);

for (const transport of ['stream', 'claimWork'] as const) {
  test(`drain (${transport}): no more claims, the running task finishes and is reported completed, the worker stops once it has`, async () => {
    const workerType = `drain-${transport}`;
    const { w, lines } = worker(workerType, { transport, drainTimeoutMs: 60_000 });
    const taskId = await createTestTask(t, workerType, { command: 'echo started; sleep 3; echo done', maxRunTime: 60 });
    await running(taskId);
    const started = Date.now();
    const drained = w.drain();
    await new Promise((r) => setTimeout(r, 300));
    // created while the worker drains: the worker has a free slot, and does not take it
    const later = await createTestTask(t, workerType, { command: 'true', maxRunTime: 60 });
    await drained;
    await w.done;
    const took = Date.now() - started;
    const s = await status(taskId);
    assert.equal(s.state, 'completed', JSON.stringify(s));
    assert.equal(s.runs.length, 1);
    assert.match(await liveLog(taskId), /done/);
    assert.ok(took < 10_000, `stopped ${took} ms after the drain began, once its task had finished`);
    assert.equal((await status(later)).state, 'pending', 'nothing claimed while draining');
    assert.ok(lines.some((l) => /^draining: no more claims; 1 task\(s\) running may finish within the drain timeout of 60 s/.test(l)), lines.join('\n'));
    assert.ok(lines.some((l) => /^drained in [\d.]+ s: of 1 task\(s\) running, 0 reported worker-shutdown/.test(l)), lines.join('\n'));
  });
}

test('drain timeout: a task still running then is reported worker-shutdown at once (the queue retries it now), another that finished in time completed', async () => {
  const { w, lines } = worker('drain-timeout', { drainTimeoutMs: 1500 });
  const long = await createTestTask(t, 'drain-timeout', { command: 'echo started; sleep 600', maxRunTime: 600 }, { retries: 2 });
  const short = await createTestTask(t, 'drain-timeout', { command: 'echo started; sleep 0.5', maxRunTime: 60 });
  await running(long);
  await running(short);
  const started = Date.now();
  await w.drain();
  const took = Date.now() - started;
  assert.ok(took >= 1400 && took < 8000, `stopped ${took} ms after the drain began (timeout 1.5 s)`);
  assert.equal((await status(short)).state, 'completed');
  const s = await status(long);
  assert.equal(s.runs[0].state, 'exception');
  assert.equal(s.runs[0].reasonResolved, 'worker-shutdown');
  assert.equal(s.state, 'pending', 'retried at once, not at claim expiry');
  assert.ok(lines.some((l) => /^drain timeout of 1.5 s reached: 1 task\(s\) still running/.test(l)), lines.join('\n'));
  assert.ok(lines.some((l) => /^drained in [\d.]+ s: of 2 task\(s\) running, 1 reported worker-shutdown/.test(l)), lines.join('\n'));
});

test('`tgs shell-worker`: a second SIGTERM while draining stops at once, reporting the running task worker-shutdown', async () => {
  const taskId = await createTestTask(t, 'drain-twice', { command: 'echo started; sleep 600', maxRunTime: 600 }, { retries: 2 });
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/entry.ts', 'shell-worker', '--provisioner-id', 'tgs-test', '--worker-type', 'drain-twice', '--worker-id', 'child', '--work-dir', workDir, '--isolation', 'none'],
    { cwd: repo, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TGS_ROOT_URL: t.rootUrl, TGS_CLIENT_ID: t.root.clientId, TGS_ACCESS_TOKEN: t.root.accessToken }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    await running(taskId);
    child.kill('SIGTERM');
    await eventually(async () => /draining: no more claims; 1 task\(s\) running may finish within the drain timeout of 300 s/.test(output), 'draining (the default 5 min)');
    await new Promise((r) => setTimeout(r, 500));
    assert.equal((await status(taskId)).state, 'running', 'a draining worker lets its task run');
    const second = Date.now();
    child.kill('SIGTERM');
    assert.equal(await exited, 0, output);
    assert.ok(Date.now() - second < 15_000, `exited ${Date.now() - second} ms after the second SIGTERM`);
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
  assert.match(output, /SIGTERM again, stopping at once/);
  const s = await status(taskId);
  assert.equal(s.runs[0].reasonResolved, 'worker-shutdown');
  assert.equal(s.state, 'pending');
});
