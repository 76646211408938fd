import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestApi, type TestApi } from '../../support/api.js';
import { eventually } from '../../support/stack.js';
import { createTestTask } from '../helpers/queueTasks.js';
import { sandboxScratch } from '../helpers/sandboxScratch.js';
import { startShellWorker, UNSAFE_LINE, type IsolationMode, type ShellWorker, type ShellWorkerOptions } from '../../src/shellWorker/index.js';
import { startTestShellWorker } from '../helpers/testShellWorker.js';
import { chooseIsolation, type MachineFacts } from '../../src/shellWorker/sandbox.js';
import { DEFAULT_UID_RANGE } from '../../src/shellWorker/runUids.js';
import { TASK_PATH } from '../../src/shellWorker/taskEnv.js';

// `tgs shell-worker --isolation`: the task author is hostile. Each run must get an identity and a filesystem view no
// other run shares, nothing it starts may outlive it, the worker's environment must not reach it, and cleaning its
// directory up must not follow what it planted there. Real processes and a real API; the worker runs as root (as CI).

const repo = fileURLToPath(new URL('../..', import.meta.url));
/** Variables a deployment puts in the worker's environment; no denylist names them all. */
const WORKER_SECRETS = { TEMPORAL_API_KEY: 'temporal-key-4711', PGPASSWORD: 'pg-password-4711', SOME_RANDOM_SECRET: 'random-secret-4711', TEMPORAL_TLS_KEY: 'tls-key-4711' };
/** What a task's environment may hold (taskEnv.ts), plus what sh itself sets and payload.env's own names. */
const ALLOWED = new Set(['PATH', 'LANG', 'LC_ALL', 'TZ', 'HOME', 'USER', 'LOGNAME', 'TMPDIR', 'TASK_ID', 'RUN_ID', 'TASK_WORKDIR', 'TGS_ROOT_URL', 'TASKCLUSTER_ROOT_URL', 'PWD', 'OLDPWD', 'SHLVL', '_', 'GREETING']);

let t: TestApi;
let scratch: string;
let workDir: string;
const workers: ShellWorker[] = [];

before(async () => {
  assert.equal(process.getuid?.(), 0, 'these tests run as root (CI does): modes user and bwrap-as-a-fresh-uid need it');
  Object.assign(process.env, WORKER_SECRETS);
  process.env.PATH = `/opt/worker-only/bin:${process.env.PATH}`;
  t = await startTestApi({ claimWorkWaitMs: 1000 });
  ({ scratch, workDir } = sandboxScratch('tgs-sandbox-'));
});
after(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await t?.close();
  for (const name of Object.keys(WORKER_SECRETS)) delete process.env[name];
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

function worker(workerType: string, isolation: IsolationMode | undefined, extra: Partial<ShellWorkerOptions> = {}): { worker: ShellWorker; lines: string[] } {
  const { worker: w, lines } = startTestShellWorker(t, workerType, { workDir, isolation, ...extra });
  workers.push(w);
  return { worker: w, lines };
}

async function finished(taskId: string): Promise<{ state: string; log: string }> {
  const s = await eventually(async () => {
    const st = (await t.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status;
    return ['completed', 'failed', 'exception'].includes(st.state) && st;
  }, `task ${taskId} resolved`, 60_000);
  const log = await fetch(`${t.rootUrl}/api/queue/v1/task/${taskId}/artifacts/public/logs/live.log`).then((r) => r.text());
  return { state: s.state, log };
}

/** Pids of processes whose command line holds `marker` (every process of the machine: the test is root). */
function processesWith(marker: string): number[] {
  const pids: number[] = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (/^\d+ \(.*\) Z/.test(stat)) continue;
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(marker)) pids.push(Number(name));
    } catch {
      // gone meanwhile
    }
  }
  return pids;
}

/** SIGKILL, unless the process ended since it was listed (an escapee's short-lived children come and go). */
function killIfAlive(pid: number): void {
  try {
    process.kill(pid, 'SIGKILL');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

/** The directory a run of `taskId` has (or had) below workDir. */
const runDirs = (taskId: string) => readdirSync(workDir).filter((d) => d.includes(taskId)).map((d) => path.join(workDir, d));

/**
 * The escape: a `setsid`, double-forked loop that outlives the command (named by `marker` in its command line), and a
 * second one that keeps swapping the directory `d` for a symlink to `outside` while the worker cleans up. Plus static
 * symlinks to `outside`, a directory the task locked (mode 000), and its environment printed as `ENV name=value`.
 */
function hostileCommand(marker: string, outside: string, then: string): string {
  return [
    'set -e',
    "env | sed 's/^/ENV /'",
    'mkdir d && for i in $(seq 1 100); do echo mine > d/f$i; done',
    `ln -s ${outside} link-dir && ln -s ${outside}/f1 link-file`,
    'mkdir locked && echo mine > locked/f && chmod 000 locked',
    `echo 'while :; do mv d d.real 2>/dev/null && ln -s ${outside} d && sleep 0.01; rm -f d; mv d.real d 2>/dev/null; done' > swap.sh`,
    `( setsid sh -c 'sh ./swap.sh ${marker} & while :; do sleep 1; done' ${marker} & )`,
    'sleep 0.3',
    'echo escaped',
    then,
  ].join('\n');
}

/** A directory outside the task's reach holding what a cleanup following `d` or `link-dir` would delete. */
function outsideDir(name: string): string {
  const dir = path.join(scratch, name);
  mkdirSync(dir);
  for (let i = 1; i <= 100; i++) writeFileSync(path.join(dir, `f${i}`), 'keep');
  return dir;
}

function assertOutsideIntact(dir: string) {
  const left = readdirSync(dir);
  assert.equal(left.length, 100, `every file of ${dir} is still there (${left.length})`);
  for (const f of left) assert.equal(readFileSync(path.join(dir, f), 'utf8'), 'keep');
}

for (const mode of ['bwrap', 'user'] as const) {
  test(`${mode}: a setsid double-forked escapee is dead when the run resolves, the worker's environment is absent, cleanup follows no symlink`, async () => {
    const { lines } = worker(`escape-${mode}`, mode);
    const marker = `tgs-escapee-${mode}-${process.pid}`;
    const outside = outsideDir(`outside-${mode}`);
    const taskId = await createTestTask(t, `escape-${mode}`, { command: hostileCommand(marker, outside, 'exit 0'), env: { GREETING: 'hi' }, maxRunTime: 60 });
    const { state, log } = await finished(taskId);
    assert.equal(state, 'completed', log);
    assert.match(log, /^escaped$/m);
    assert.deepEqual(processesWith(marker), [], 'nothing the run started is alive once it is resolved');
    assert.ok(lines.some((l) => l.startsWith(`isolation ${mode} (asked for)`)), lines.join('\n'));

    const names = [...log.matchAll(/^ENV ([^=]+)=/gm)].map((m) => m[1]);
    assert.ok(names.includes('TASK_ID') && names.includes('GREETING'), log);
    for (const [name, value] of Object.entries(WORKER_SECRETS)) {
      assert.ok(!names.includes(name), `${name} is not in the task's environment`);
      assert.ok(!log.includes(value), `${name}'s value is not in the log`);
    }
    assert.deepEqual(names.filter((n) => !ALLOWED.has(n)), [], 'nothing outside the allowlist');
    assert.match(log, new RegExp(`^ENV HOME=${workDir}/tgs-task-${taskId}-0-`, 'm'), 'HOME is the task directory');
    // a fixed PATH: the node binary's directory and Debian's default, nothing of the worker's PATH (its layout)
    const expectedPath = [...new Set([path.dirname(process.execPath), ...TASK_PATH.split(':')])].join(':');
    assert.match(log, new RegExp(`^ENV PATH=${expectedPath.replace(/[.]/g, '\\.')}$`, 'm'));

    assertOutsideIntact(outside);
    assert.deepEqual(runDirs(taskId), [], 'the task directory is removed (symlinks, swapped symlinks and the locked directory included)');

    // maxRunTime: the kill, not the command's own exit, must take the escapee down too
    const slow = await createTestTask(t, `escape-${mode}`, { command: hostileCommand(`${marker}-slow`, outside, 'sleep 300'), maxRunTime: 2 });
    const killed = await finished(slow);
    assert.equal(killed.state, 'failed', killed.log);
    assert.match(killed.log, /maxRunTime of 2 s exceeded/);
    assert.deepEqual(processesWith(`${marker}-slow`), [], 'nothing the killed run started is alive once it is resolved');
    assertOutsideIntact(outside);
    assert.deepEqual(runDirs(slow), []);
  });

  test(`${mode}: a task cannot read a concurrently running run's directory, /proc/<pid>/environ or temporary files`, async () => {
    worker(`cross-${mode}`, mode);
    const { victimLog, attackerLog, nonce } = await crossRun(`cross-${mode}`);
    assert.doesNotMatch(attackerLog, /^READ /m, attackerLog);
    assert.ok(!attackerLog.includes(nonce), 'the other run\'s secret is not in the attacker\'s log');
    assert.match(attackerLog, /^PROBED$/m, 'the probe ran to its end');
    assert.match(victimLog, /resolved: completed/);
  });
}

/**
 * Two runs of one worker at once: the victim puts a secret in its environment (payload.env), a file of its directory
 * and its TMPDIR, then waits; the attacker looks for it in every /proc/<pid>/environ, below the worker's work
 * directory, in /tmp and /var/tmp, and through /proc/<pid>/root and /proc/<pid>/cwd.
 */
async function crossRun(workerType: string): Promise<{ victimLog: string; attackerLog: string; nonce: string }> {
  const nonce = `victim-secret-${workerType}-${process.pid}`;
  const victim = await createTestTask(t, workerType, {
    command: 'echo "$VICTIM_SECRET" > secret.txt && echo "$VICTIM_SECRET" > "$TMPDIR/tmp-secret.txt" && touch ready && while [ ! -e release ]; do sleep 0.1; done',
    env: { VICTIM_SECRET: nonce },
    maxRunTime: 120,
  });
  const ready = await eventually(async () => runDirs(victim).find((d) => existsSync(path.join(d, 'ready'))), 'the victim to be ready', 60_000);
  const attacker = await createTestTask(t, workerType, {
    command: [
      // errors on stdout too: the log interleaves the two pipes as their chunks arrive, and a stderr chunk in front of
      // a line would hide it from the anchored matches below
      'exec 2>&1',
      `for f in /proc/[0-9]*/environ; do if tr '\\0' '\\n' < "$f" 2>/dev/null | grep VICTIM_SECRET; then echo "READ $f"; fi; done`,
      `for f in $(find ${workDir} /tmp /var/tmp /proc/[0-9]*/root/tmp /proc/[0-9]*/cwd/ -maxdepth 3 -name '*secret*' 2>/dev/null); do if cat "$f"; then echo "READ $f"; fi; done`,
      `if ls ${ready}; then echo "READ ${ready}"; fi`,
      'echo PROBED',
    ].join('\n'),
    maxRunTime: 60,
  });
  const attacked = await finished(attacker);
  assert.equal(attacked.state, 'completed', attacked.log);
  writeFileSync(path.join(ready, 'release'), '');
  const released = await finished(victim);
  assert.equal(released.state, 'completed', released.log);
  return { victimLog: released.log, attackerLog: attacked.log, nonce };
}

test('none: logs the unsafe line once, and there the same escape and probes succeed (so the tests above can fail)', async () => {
  const { lines } = worker('escape-none', 'none');
  await eventually(async () => lines.some((l) => l.startsWith('claiming tasks')), 'the worker to start');
  assert.equal(lines.filter((l) => l === UNSAFE_LINE).length, 1, lines.join('\n'));
  assert.equal(UNSAFE_LINE, "unsafe: tasks share the worker's identity and can read its credentials (--isolation none)");

  const marker = `tgs-escapee-none-${process.pid}`;
  const outside = outsideDir('outside-none');
  const taskId = await createTestTask(t, 'escape-none', { command: hostileCommand(marker, outside, 'exit 0'), maxRunTime: 60 });
  const { state, log } = await finished(taskId);
  assert.equal(state, 'completed', log);
  const survivors = processesWith(marker);
  assert.ok(survivors.length > 0, 'without a sandbox the escapee outlives its run');
  for (const pid of survivors) killIfAlive(pid);

  worker('cross-none', 'none');
  const { attackerLog, nonce } = await crossRun('cross-none');
  assert.match(attackerLog, /^READ \/proc\/\d+\/environ$/m, attackerLog);
  assert.ok(attackerLog.includes(nonce));
});

test('the default is the strongest mode the machine gives (bwrap here), logged at start', async () => {
  const { lines } = worker('default', undefined);
  await eventually(async () => lines.some((l) => l.startsWith('claiming tasks')), 'the worker to start');
  assert.ok(lines.some((l) => l.startsWith('isolation bwrap (the strongest this machine gives): each run in its own user, PID, IPC, UTS and cgroup namespaces')), lines.join('\n'));
  assert.ok(lines.some((l) => l.includes(`as a fresh uid from ${DEFAULT_UID_RANGE.first}-${DEFAULT_UID_RANGE.last}`)), lines.join('\n'));
});

test('--isolation bwrap where bwrap is missing refuses to start with the install hint (CLI, a PATH without it; and a missing binary)', () => {
  const emptyBin = mkdtempSync(path.join(scratch, 'bin-'));
  const r = spawnSync(
    process.execPath,
    ['--import', 'tsx', 'src/cli/entry.ts', 'shell-worker', '--provisioner-id', 'tgs-test', '--worker-type', 'never', '--isolation', 'bwrap'],
    { cwd: repo, encoding: 'utf8', env: { PATH: emptyBin, HOME: scratch, TGS_ROOT_URL: t.rootUrl, TGS_CLIENT_ID: t.root.clientId, TGS_ACCESS_TOKEN: t.root.accessToken }, timeout: 60_000 },
  );
  assert.equal(r.status, 1, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stderr, /--isolation bwrap: bubblewrap cannot run sandboxes here: bwrap was not found on PATH/);
  assert.match(r.stderr, /apt-get install bubblewrap/);
  assert.doesNotMatch(r.stdout, /claiming tasks/);

  assert.throws(
    () => startShellWorker({ rootUrl: t.rootUrl, provisionerId: 'tgs-test', workerType: 'never', capacity: 1, isolation: 'bwrap', bwrapPath: path.join(emptyBin, 'bwrap') }),
    /--isolation bwrap: bubblewrap cannot run sandboxes here: .*could not be started.*apt-get install bubblewrap/,
  );
});

test('chooseIsolation: the strongest available, refusals that say what to do, tgs dev\'s fallback to none', () => {
  const noBwrap: MachineFacts['bwrap'] = { ok: false, why: 'bwrap was not found on PATH (/usr/bin)' };
  const bwrap: MachineFacts['bwrap'] = { ok: true, path: '/usr/bin/bwrap' };
  assert.equal(chooseIsolation(undefined, { uid: 1000, bwrap }).mode, 'bwrap');
  assert.equal(chooseIsolation(undefined, { uid: 0, bwrap }).mode, 'bwrap');
  assert.equal(chooseIsolation(undefined, { uid: 0, bwrap: noBwrap }).mode, 'user');
  assert.throws(() => chooseIsolation(undefined, { uid: 1000, bwrap: noBwrap }), /no task sandbox is available: .*not root \(uid 1000\).*apt-get install bubblewrap.*--isolation none/);
  const dev = chooseIsolation(undefined, { uid: 1000, bwrap: noBwrap }, { fallbackToNone: true });
  assert.equal(dev.mode, 'none');
  assert.match(dev.why, /apt-get install bubblewrap/);
  assert.throws(() => chooseIsolation('user', { uid: 1000, bwrap }), /--isolation user: giving every run its own uid needs root, and this worker runs as uid 1000/);
  assert.throws(() => chooseIsolation('bwrap', { uid: 0, bwrap: noBwrap }), /apt-get install bubblewrap.*--isolation user/);
  assert.throws(() => chooseIsolation('docker' as IsolationMode, { uid: 0, bwrap }), /--isolation "docker": give bwrap, user or none/);
  assert.equal(chooseIsolation('none', { uid: 1000, bwrap: noBwrap }).mode, 'none');
});
