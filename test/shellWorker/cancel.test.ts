import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { startTestApi, type TestApi } from '../../support/api.js';
import { eventually } from '../../support/stack.js';
import { createTestTask } from '../helpers/queueTasks.js';
import type { RunOutcome, ShellWorker, ShellWorkerOptions } from '../../src/shellWorker/index.js';
import { startTestShellWorker } from '../helpers/testShellWorker.js';

/*
 * A cancel reaches a running command in seconds: the queue's NOTIFY, the worker stream's `canceled` frame, SIGTERM to
 * the run's process group, SIGKILL after the grace; nothing is reported (the run is resolved already).
 */

let t: TestApi;
let workDir: string;
let scratch: string;
const workers: ShellWorker[] = [];
const outcomes = new Map<string, RunOutcome>();
const lines: string[] = [];

before(async () => {
  // 60 s claims: nothing here ends by a reclaim or a claim's expiry
  t = await startTestApi({ claimWorkWaitMs: 1000, claimTimeoutSeconds: 60 });
  workDir = mkdtempSync(path.join(tmpdir(), 'tgs-cancel-work-'));
  scratch = mkdtempSync(path.join(tmpdir(), 'tgs-cancel-scratch-'));
  // the runs' own uids (the default sandbox, as root) must be able to enter it
  chmodSync(workDir, 0o711);
});
after(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await t.close();
  rmSync(workDir, { recursive: true, force: true });
  rmSync(scratch, { recursive: true, force: true });
});

function worker(workerType: string, extra: Partial<ShellWorkerOptions> = {}): ShellWorker {
  const { worker: w } = startTestShellWorker(t, workerType, {
    workDir,
    capacity: 1,
    log: (line) => lines.push(line),
    onRun: (run) => outcomes.set(`${run.taskId}/${run.runId}`, run.outcome),
    ...extra,
  });
  workers.push(w);
  return w;
}

const runDir = (taskId: string) => {
  const dirs = readdirSync(workDir).filter((d) => d.startsWith(`tgs-task-${taskId}-`));
  return dirs.length === 1 ? path.join(workDir, dirs[0]) : undefined;
};
const status = async (taskId: string) => (await t.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status;
const liveLog = (taskId: string) => fetch(`${t.rootUrl}/api/queue/v1/task/${taskId}/runs/0/artifacts/public/logs/live.log`).then((r) => r.text());

/** Polls every 5 ms (the run's directory goes once the run ends: the trap below keeps it a second). */
async function appears(file: () => string | undefined, timeoutMs: number): Promise<number> {
  const until = Date.now() + timeoutMs;
  while (Date.now() < until) {
    const f = file();
    if (f && existsSync(f)) return Date.now();
    await new Promise((r) => setTimeout(r, 5));
  }
  throw new Error(`no file after ${timeoutMs} ms`);
}

test('over the worker stream a cancel reaches the command (default sandbox) as SIGTERM in seconds; the run is not reported and stays exception/canceled', async () => {
  worker('cancel-term');
  const figures: number[] = [];
  const fromCall: number[] = [];
  for (let i = 0; i < 3; i++) {
    const taskId = await createTestTask(t, 'cancel-term', {
      // the trap writes in the run's own directory (the sandbox sees nothing else) and keeps it a second
      command: 'trap "echo term > termed; sleep 1; exit 0" TERM; echo started > started; sleep 600 & wait',
      maxRunTime: 600,
    });
    await appears(() => runDir(taskId) && path.join(runDir(taskId) as string, 'started'), 60_000);
    const called = Date.now();
    const res = await t.request('POST', `/api/queue/v1/task/${taskId}/cancel`);
    const answered = Date.now();
    assert.equal(res.status, 200, JSON.stringify(res.body));
    const dir = runDir(taskId) as string;
    const termed = await appears(() => path.join(dir, 'termed'), 10_000);
    figures.push(termed - answered);
    fromCall.push(termed - called);
    assert.equal(readFileSync(path.join(dir, 'termed'), 'utf8'), 'term\n');
    await eventually(async () => outcomes.get(`${taskId}/0`), `run ${taskId}/0 ended`);
    assert.equal(outcomes.get(`${taskId}/0`), 'canceled');
    const s = await status(taskId);
    assert.equal(s.state, 'exception');
    assert.deepEqual(s.runs.map((r: { state: string; reasonResolved: string }) => `${r.state}/${r.reasonResolved}`), ['exception/canceled'], 'one run, as the cancel left it');
    const log = await liveLog(taskId);
    assert.match(log, /resolved exception canceled by the queue \(not by this worker\): SIGTERM to the command, SIGKILL in 10 s/);
    assert.match(log, /exit code 0/, 'the trap ended it, before the grace');
    assert.ok(!lines.some((l) => l.includes(taskId) && /refused/.test(l)), `no report was tried: ${lines.filter((l) => l.includes(taskId)).join('\n')}`);
  }
  console.log(`# cancelTask answered → SIGTERM trap ran: ${figures.join(', ')} ms (from the call: ${fromCall.join(', ')} ms)`);
  // the goal is 2 s; the machine these tests share is loaded, hence the median of three
  const median = [...figures].sort((a, b) => a - b)[1];
  assert.ok(median <= 2000, `cancel → SIGTERM ${figures.join(', ')} ms`);
});

test('a command that ignores SIGTERM is killed after the payload\'s killGrace; the worker takes the next task after that', async () => {
  worker('cancel-kill', { isolation: 'none', killGraceMs: 30_000 });
  const pidFile = path.join(scratch, 'pid');
  const taskId = await createTestTask(t, 'cancel-kill', {
    command: `trap "" TERM; echo $$ > ${pidFile}.tmp && mv ${pidFile}.tmp ${pidFile}; while true; do sleep 0.2; done`,
    maxRunTime: 600,
    killGrace: 2,
  });
  await appears(() => pidFile, 60_000);
  const pid = Number(readFileSync(pidFile, 'utf8'));
  const started = Date.now();
  assert.equal((await t.request('POST', `/api/queue/v1/task/${taskId}/cancel`)).status, 200);
  await new Promise((r) => setTimeout(r, 1000));
  assert.doesNotThrow(() => process.kill(pid, 0), 'alive through SIGTERM, within the grace');
  await eventually(async () => outcomes.get(`${taskId}/0`), 'the run ended', 20_000);
  const took = Date.now() - started;
  assert.equal(outcomes.get(`${taskId}/0`), 'canceled');
  assert.ok(took >= 1900 && took < 15_000, `killed ${took} ms after the cancel (killGrace 2 s, the worker's 30 s not used)`);
  assert.throws(() => process.kill(pid, 0), 'the command is gone');
  assert.match(await liveLog(taskId), /still running 2 s after SIGTERM: SIGKILL/);
  // its slot is free again
  const next = await createTestTask(t, 'cancel-kill', { command: 'true', maxRunTime: 60 });
  await eventually(async () => (await status(next)).state === 'completed', 'the next task completed');
});

test('with claimWork the worker finds out as Taskcluster\'s do: not at the cancel (at its next reclaim)', async () => {
  worker('cancel-poll', { isolation: 'none', transport: 'claimWork' });
  const taskId = await createTestTask(t, 'cancel-poll', { command: 'echo started; sleep 600', maxRunTime: 600 });
  await eventually(async () => (await status(taskId)).state === 'running' && /started/.test(await liveLog(taskId)), 'running');
  assert.equal((await t.request('POST', `/api/queue/v1/task/${taskId}/cancel`)).status, 200);
  await new Promise((r) => setTimeout(r, 2000));
  assert.equal(outcomes.get(`${taskId}/0`), undefined, 'no word of the cancel before the reclaim (60 s claims: at 40 s)');
});

for (const isolation of ['bwrap', 'user'] as const) {
  test(`${isolation}: the cancel's SIGTERM reaches the canceled run's processes only, not a run beside it`, async () => {
    worker(`cancel-side-${isolation}`, { isolation, capacity: 2 });
    const command = 'trap "echo term > termed; sleep 1; exit 0" TERM; echo started > started; sleep 600 & wait';
    const [a, b] = [await createTestTask(t, `cancel-side-${isolation}`, { command, maxRunTime: 600 }), await createTestTask(t, `cancel-side-${isolation}`, { command, maxRunTime: 600 })];
    for (const id of [a, b]) await appears(() => runDir(id) && path.join(runDir(id) as string, 'started'), 60_000);
    const dirB = runDir(b) as string;
    assert.equal((await t.request('POST', `/api/queue/v1/task/${a}/cancel`)).status, 200);
    const dirA = runDir(a) as string;
    await appears(() => path.join(dirA, 'termed'), 10_000);
    await eventually(async () => outcomes.get(`${a}/0`), 'the canceled run ended');
    assert.equal(outcomes.get(`${a}/0`), 'canceled');
    await new Promise((r) => setTimeout(r, 500));
    assert.ok(!existsSync(path.join(dirB, 'termed')), 'the run beside it got no SIGTERM');
    assert.equal((await status(b)).state, 'running');
    assert.equal(outcomes.get(`${b}/0`), undefined);
    // and its own cancel reaches it
    assert.equal((await t.request('POST', `/api/queue/v1/task/${b}/cancel`)).status, 200);
    await appears(() => path.join(dirB, 'termed'), 10_000);
  });
}
