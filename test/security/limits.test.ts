import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { startTestApi, type TestApi } from '../../support/api.js';
import { eventually } from '../../support/stack.js';
import { createTestTask } from '../helpers/queueTasks.js';
import { sandboxScratch } from '../helpers/sandboxScratch.js';
import type { ShellWorker } from '../../src/shellWorker/index.js';
import { startTestShellWorker } from '../helpers/testShellWorker.js';
import { parseSize, planCgroups } from '../../src/shellWorker/limits.js';
import { probeBwrap } from '../../src/shellWorker/sandbox.js';

// Per-run bounds (limits.ts): a fork bomb, a 2 GiB allocation, a disk fill, a big file and a full /tmp each end as
// the run's failure with the reason in its log, and the worker goes on running tasks. Real processes, small bounds;
// the worker runs as root (as CI), where this machine gives cgroup v1's memory, pids and cpu controllers.

const MiB = 1024 ** 2;
const LIMITS = { memoryBytes: 128 * MiB, processes: 64, cpus: 0.5, tmpBytes: 16 * MiB, fileBytes: 16 * MiB, taskDirBytes: 48 * MiB };

let t: TestApi;
let scratch: string;
let workDir: string;
const workers: ShellWorker[] = [];
const bwrapWorks = probeBwrap({ as: { uid: 1565535, gid: 1565535 } }).ok;
const ISOLATIONS = bwrapWorks ? (['bwrap', 'user'] as const) : (['user'] as const);

before(async () => {
  assert.equal(process.getuid?.(), 0, 'these tests run as root (CI does)');
  if (!bwrapWorks) console.log('# this machine could not give --isolation bwrap: its cases ran in user mode only');
  const cgroups = await planCgroups();
  console.log(`# cgroups: ${cgroups.why}`);
  assert.ok(cgroups.plan?.parents.memory && cgroups.plan.parents.pids && cgroups.plan.parents.cpu, `this machine gives memory, pids and cpu cgroups: ${cgroups.why}`);
  t = await startTestApi({ claimWorkWaitMs: 1000 });
  ({ scratch, workDir } = sandboxScratch('tgs-limits-'));
});
after(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await t?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

function worker(workerType: string, isolation: 'bwrap' | 'user'): string[] {
  // nothing of the bounds goes to a forwarder
  const { worker: w, lines } = startTestShellWorker(t, workerType, { workDir, isolation, capacity: 1, network: 'none', limits: LIMITS });
  workers.push(w);
  return lines;
}

async function run(workerType: string, command: string, maxRunTime = 30): Promise<{ taskId: string; state: string; log: string }> {
  const taskId = await createTestTask(t, workerType, { command, maxRunTime });
  const s = await eventually(async () => {
    const st = (await t.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status;
    return ['completed', 'failed', 'exception'].includes(st.state) && st;
  }, `task ${taskId} resolved`, 90_000);
  const log = await fetch(`${t.rootUrl}/api/queue/v1/task/${taskId}/artifacts/public/logs/live.log`).then((r) => r.text());
  return { taskId, state: s.state, log };
}

/** The worker still runs tasks: the bound ended the run, not the worker. */
async function stillWorks(workerType: string) {
  const { state, log } = await run(workerType, 'echo alive');
  assert.equal(state, 'completed', log);
  assert.match(log, /^alive$/m);
}

/** Run cgroups left below this process's own (every one must be gone once its run resolved). */
function leftoverCgroups(): string[] {
  const own = readFileSync('/proc/self/cgroup', 'utf8');
  const left: string[] = [];
  for (const c of ['memory', 'pids', 'cpu']) {
    const p = new RegExp(`^\\d+:(?:[^:]*,)?${c}(?:,[^:]*)?:(.*)$`, 'm').exec(own)?.[1];
    if (p === undefined) continue;
    const dir = path.join('/sys/fs/cgroup', c, p);
    left.push(...readdirSync(dir).filter((d) => d.startsWith('tgs-run-')).map((d) => path.join(dir, d)));
  }
  return left;
}

for (const isolation of ISOLATIONS) {
  test(`${isolation}: the run's cgroup holds the bounds while it runs, and is removed after`, async () => {
    const workerType = `bounds-${isolation}`;
    const lines = worker(workerType, isolation);
    const taskId = await createTestTask(t, workerType, { command: 'touch ready; while [ ! -e release ]; do sleep 0.1; done', maxRunTime: 60 });
    const dir = await eventually(async () => readdirSync(workDir).map((d) => path.join(workDir, d)).find((d) => d.includes(taskId) && existsSync(path.join(d, 'ready'))), 'the run to start', 60_000);
    const cgroups = leftoverCgroups().filter((d) => d.includes(taskId));
    const read = (c: string, file: string) => readFileSync(path.join(cgroups.find((d) => d.includes(`/${c}/`)) as string, file), 'utf8').trim();
    assert.equal(Number(read('memory', 'memory.limit_in_bytes')), LIMITS.memoryBytes);
    assert.equal(Number(read('pids', 'pids.max')), LIMITS.processes);
    assert.equal(Number(read('cpu', 'cpu.cfs_quota_us')), 50_000);
    assert.ok(Number(read('pids', 'pids.current')) >= 1, 'the run\'s processes are in it');
    writeFileSync(path.join(dir, 'release'), '');
    assert.equal((await eventually(async () => {
      const st = (await t.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status;
      return ['completed', 'failed', 'exception'].includes(st.state) && st;
    }, 'resolved')).state, 'completed');
    await eventually(async () => leftoverCgroups().filter((d) => d.includes(taskId)).length === 0, 'the run\'s cgroups to be removed');
    assert.ok(lines.some((l) => /^each run's bounds: memory 128 MiB, 64 processes and threads, 0\.5 CPUs \(cgroup v1/.test(l)), lines.join('\n'));
  });

  test(`${isolation}: a fork bomb ends as the run's failure at the process bound`, async () => {
    const workerType = `fork-${isolation}`;
    worker(workerType, isolation);
    // quiet: every refused fork would print a line
    const { state, log } = await run(workerType, 'b() { b & b & wait; } 2>/dev/null; b', 10);
    assert.equal(state, 'failed', log);
    assert.match(log, /the run reached its bound of 64 processes and threads \(--max-processes\): \d+ forks were refused/);
    await stillWorks(workerType);
  });

  test(`${isolation}: a 2 GiB allocation ends as the run's failure at the memory bound`, async () => {
    const workerType = `mem-${isolation}`;
    worker(workerType, isolation);
    // tail -n 1 holds the whole last "line" in memory: 2 GiB without a newline
    const { state, log } = await run(workerType, 'head -c 2G /dev/zero | tail -n 1 >/dev/null; echo "tail exited $?"');
    assert.equal(state, 'failed', log);
    assert.match(log, /the run reached its memory bound of 128 MiB \(--max-memory\): the kernel killed \d+ of its processes/);
    assert.match(log, /the command exited 0, but the run reached a bound: it fails/);
    await stillWorks(workerType);
  });

  test(`${isolation}: filling the task directory, a file past the file size bound, and (bwrap) a full /tmp each fail the run`, async () => {
    const workerType = `disk-${isolation}`;
    worker(workerType, isolation);
    const fill = await run(workerType, 'i=0; while :; do head -c 8M /dev/zero > f$i || exit 9; i=$((i+1)); done');
    assert.equal(fill.state, 'failed', fill.log);
    assert.match(fill.log, /the run's directory holds more than its bound of 48 MiB \(--max-task-dir\): killed the command/);

    const big = await run(workerType, 'head -c 100M /dev/zero > big');
    assert.equal(big.state, 'failed', big.log);
    assert.match(big.log, /(killed by SIGXFSZ|exit code 153) after .*: a file reached the file size bound \(--max-file-size\)/);

    if (isolation === 'bwrap') {
      const tmp = await run(workerType, 'head -c 12M /dev/zero > /tmp/a; head -c 12M /dev/zero > /var/tmp/b; df -k /tmp | tail -1; head -c 12M /dev/zero > /tmp/c');
      assert.equal(tmp.state, 'failed', tmp.log);
      assert.match(tmp.log, /No space left on device/);
      assert.match(tmp.log, /^tmpfs\s+16384\s/m, '/tmp is a 16 MiB tmpfs');
    }
    await stillWorks(workerType);
  });
}

test('sizes parse as flags give them', () => {
  assert.equal(parseSize('--max-memory', '512M'), 512 * MiB);
  assert.equal(parseSize('--max-memory', '1.5GiB'), 1.5 * 1024 * MiB);
  assert.equal(parseSize('--max-tmp', '65536'), 65536);
  assert.throws(() => parseSize('--max-memory', 'lots'), /--max-memory "lots": give a size of at least 4K, e.g. 512M or 4G/);
  assert.throws(() => parseSize('--max-memory', '10'), /at least 4K/);
});
