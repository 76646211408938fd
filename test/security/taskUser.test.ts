import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestApi, type TestApi } from '../../support/api.js';
import { eventually } from '../../support/stack.js';
import { createTestTask } from '../helpers/queueTasks.js';
import { prepareDataDir, rootAccessToken } from '../../src/cli/devDataDir.js';
import { parsePasswdLine, resolveTaskUser, type TaskUser } from '../../src/shellWorker/taskUser.js';

// `tgs shell-worker --task-user`: a task must not be able to read its worker's credentials. The worker runs as
// root (as CI does), the real CLI in a child process, so /proc/<worker pid>/environ holds its TGS_ACCESS_TOKEN.
// With --task-user, the default sandbox (bwrap here) runs as that user instead of a fresh uid per run.

const repo = fileURLToPath(new URL('../..', import.meta.url));
const USER = 'tgs-task-test';

let t: TestApi;
let scratch: string;
let user: TaskUser;
const children: ChildProcess[] = [];

before(async () => {
  assert.equal(process.getuid?.(), 0, 'these tests run as root (CI does): only root can start tasks as another user');
  if (spawnSync('getent', ['passwd', USER]).status !== 0) {
    const made = spawnSync('useradd', ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', USER], { encoding: 'utf8' });
    assert.equal(made.status, 0, `useradd ${USER}: ${made.stderr}`);
  }
  user = resolveTaskUser(USER);
  t = await startTestApi({ claimWorkWaitMs: 1000 });
  // Open to everyone (like /home): what keeps the task out must be the modes of the files themselves.
  scratch = mkdtempSync(path.join(tmpdir(), 'tgs-task-user-'));
  chmodSync(scratch, 0o755);
});
after(async () => {
  for (const c of children) if (c.exitCode === null) c.kill('SIGKILL');
  await t?.close();
  if (scratch) rmSync(scratch, { recursive: true, force: true });
});

/** The real `tgs shell-worker` in a child process, with the root client's credentials in its environment. */
function startWorker(workerType: string, extraArgs: string[], workDir: string): { child: ChildProcess; output: () => string } {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/entry.ts', 'shell-worker', '--provisioner-id', 'tgs-test', '--worker-type', workerType, '--worker-id', workerType, '--work-dir', workDir, ...extraArgs],
    {
      cwd: repo,
      env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TGS_ROOT_URL: t.rootUrl, TGS_CLIENT_ID: t.root.clientId, TGS_ACCESS_TOKEN: t.root.accessToken },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  return { child, output: () => out };
}

const createTask = (workerType: string, payload: unknown) => createTestTask(t, workerType, payload);

async function finishedLog(taskId: string): Promise<{ state: string; log: string }> {
  const s = await eventually(async () => {
    const st = (await t.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status;
    return ['completed', 'failed', 'exception'].includes(st.state) && st;
  }, `task ${taskId} resolved`, 60_000);
  const log = await fetch(`${t.rootUrl}/api/queue/v1/task/${taskId}/artifacts/public/logs/live.log`).then((r) => r.text());
  return { state: s.state, log };
}

/**
 * A task that tries the three ways to the worker's credentials: its process environment, its credentials file,
 * and tgs dev's data directory (root token file, listing). Each attempt prints READ or DENIED on a line of its own:
 * the errors go to stdout too, because the log interleaves the two pipes as their chunks arrive (a stderr chunk once
 * landed in front of a DENIED line).
 */
function stealingTask(workerPid: number, credentialsFile: string, dataDir: string) {
  const attempts = [`/proc/${workerPid}/environ`, credentialsFile, path.join(dataDir, 'root-access-token')]
    .map((f) => `if cat '${f}' 2>&1; then echo; echo 'READ ${f}'; else echo 'DENIED ${f}'; fi`)
    .join('; ');
  return {
    command: `${attempts}; if ls '${dataDir}' 2>&1; then echo 'READ ${dataDir}'; else echo 'DENIED ${dataDir}'; fi; echo "uid=$(id -u) home=$HOME owner=$(stat -c %U .)"`,
    maxRunTime: 60,
  };
}

test('with --task-user the sandboxed task runs as that user and cannot read the worker\'s environ, credentials file or tgs dev\'s data dir; with --isolation none, it can', async () => {
  const workDir = mkdtempSync(path.join(scratch, 'work-'));
  chmodSync(workDir, 0o711);
  const credentialsFile = path.join(scratch, 'worker-credentials');
  writeFileSync(credentialsFile, `TGS_CLIENT_ID=${t.root.clientId}\nTGS_ACCESS_TOKEN=${t.root.accessToken}\n`, { mode: 0o600 });
  const dataDir = path.join(scratch, 'dev-data');
  prepareDataDir(dataDir);
  const devToken = rootAccessToken(dataDir, {});
  assert.equal(statSync(dataDir).mode & 0o777, 0o700, 'tgs dev\'s data directory is owner-only');
  assert.equal(statSync(path.join(dataDir, 'root-access-token')).mode & 0o777, 0o600);

  const confined = startWorker('confined', ['--task-user', USER], workDir);
  await eventually(async () => confined.output().includes('claiming tasks'), 'the confined worker to start', 30_000);
  assert.match(confined.output(), new RegExp(`isolation bwrap \\(the strongest this machine gives\\): .* as ${USER} \\(uid ${user.uid}\\) outside`));
  const denied = await finishedLog(await createTask('confined', stealingTask(confined.child.pid as number, credentialsFile, dataDir)));
  assert.equal(denied.state, 'completed', denied.log);
  for (const target of [`/proc/${confined.child.pid}/environ`, credentialsFile, path.join(dataDir, 'root-access-token'), dataDir]) {
    assert.match(denied.log, new RegExp(`^DENIED ${target}$`, 'm'), `${target} out of reach`);
  }
  assert.doesNotMatch(denied.log, /^READ /m);
  assert.ok(!denied.log.includes(t.root.accessToken), 'the worker\'s token is not in the log');
  assert.ok(!denied.log.includes(devToken), 'tgs dev\'s root token is not in the log');
  assert.match(denied.log, new RegExp(`^uid=${user.uid} home=${workDir}/tgs-task-\\S+ owner=${USER}$`, 'm'), 'its own uid, HOME and directory');

  // The same task under an unsandboxed worker reads all of it: the checks above can fail.
  const open = startWorker('open', ['--isolation', 'none'], workDir);
  const read = await finishedLog(await createTask('open', stealingTask(open.child.pid as number, credentialsFile, dataDir)));
  assert.equal(read.state, 'completed', read.log);
  assert.match(read.log, new RegExp(`^READ /proc/${open.child.pid}/environ$`, 'm'));
  assert.match(read.log, new RegExp(`^READ ${credentialsFile}$`, 'm'));
  assert.ok(read.log.includes(t.root.accessToken), 'unsandboxed, the task reads the worker\'s token');
  assert.ok(read.log.includes(devToken));
  assert.match(open.output(), /unsafe: tasks share the worker's identity and can read its credentials \(--isolation none\)/);
});

test('--task-user refuses to start when the worker is not root, saying why', async () => {
  // The real CLI, started as the unprivileged user itself. The Node under test may live where that user cannot
  // execute it (CI's Node 26 is under root's 0700 home); then the machine's own node runs the same CLI.
  const canRun = spawnSync(process.execPath, ['--version'], { uid: user.uid, gid: user.gid }).status === 0;
  // The CLI's source must be readable by that user too: a checkout under a 0700 directory (mktemp -d) is not.
  const entry = path.join(repo, 'src/cli/entry.ts');
  assert.equal(
    spawnSync('/usr/bin/test', ['-r', entry], { uid: user.uid, gid: user.gid }).status,
    0,
    `${USER} (uid ${user.uid}) cannot read ${entry}, so this test cannot start the CLI as that user: clone the repository where every user can read it (each parent directory o+x), as CI does`,
  );
  const r = spawnSync(
    canRun ? process.execPath : '/usr/bin/node',
    ['--import', 'tsx', 'src/cli/entry.ts', 'shell-worker', '--provisioner-id', 'tgs-test', '--worker-type', 'never', '--task-user', USER],
    {
      cwd: repo,
      uid: user.uid,
      gid: user.gid,
      encoding: 'utf8',
      env: { PATH: process.env.PATH ?? '', HOME: scratch, TGS_ROOT_URL: t.rootUrl, TGS_CLIENT_ID: t.root.clientId, TGS_ACCESS_TOKEN: t.root.accessToken },
      timeout: 60_000,
    },
  );
  assert.equal(r.status, 1, `${r.stdout}\n${r.stderr}`);
  assert.match(r.stderr, new RegExp(`--task-user ${USER}: running tasks as another user needs root, and this worker runs as uid ${user.uid}`));
  assert.match(r.stderr, /leave out --task-user \(tasks then run as the worker's own user and can read its credentials\)/);
  assert.doesNotMatch(r.stdout, /claiming tasks/);
});

test('--task-user: an unknown user, root itself and a malformed name are refused; passwd lines are parsed', () => {
  assert.throws(() => resolveTaskUser('no-such-user-tgs', 0), /--task-user no-such-user-tgs: no such user on this machine/);
  assert.throws(() => resolveTaskUser('root', 0), /that is uid 0 \(root\)/);
  assert.throws(() => resolveTaskUser('a:b', 0), /not a user name/);
  assert.throws(() => resolveTaskUser(USER, 1000), /needs root, and this worker runs as uid 1000/);
  assert.deepEqual(parsePasswdLine('builder:x:1001:1002:Builder,,,:/home/builder:/bin/sh\n'), { name: 'builder', uid: 1001, gid: 1002 });
  assert.equal(parsePasswdLine('garbage'), undefined);
});
