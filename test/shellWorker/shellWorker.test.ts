import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { chmodSync, chownSync, existsSync, linkSync, mkdtempSync, readdirSync, readFileSync, realpathSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestApi, type TestApi } from '../../support/api.js';
import { eventually } from '../../support/stack.js';
import { createTestTask } from '../helpers/queueTasks.js';
import { startShellWorker, type ShellWorker, type ShellWorkerOptions } from '../../src/shellWorker/index.js';
import { httpDuration } from '../../src/observability/metrics.js';
import { parseShellPayload } from '../../src/shellWorker/payload.js';
import { openConfined } from '../../src/shellWorker/confine.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));

let t: TestApi;
let scratch: string;
let workDir: string;
const workers: ShellWorker[] = [];

before(async () => {
  // a 3 s claim: a task that runs longer only finishes because the worker reclaims it
  t = await startTestApi({ claimWorkWaitMs: 1000, claimTimeoutSeconds: 3 });
  scratch = mkdtempSync(path.join(tmpdir(), 'tgs-shell-test-'));
  workDir = mkdtempSync(path.join(tmpdir(), 'tgs-shell-work-'));
  // the runs' own uids (the default sandbox, as root) must be able to enter it
  chmodSync(workDir, 0o711);
});
after(async () => {
  await Promise.all(workers.map((w) => w.stop()));
  await t.close();
  rmSync(scratch, { recursive: true, force: true });
  rmSync(workDir, { recursive: true, force: true });
});

/** A worker on its own workerType, so tests of this file never take each other's tasks. */
function worker(workerType: string, capacity = 1, extra: Partial<ShellWorkerOptions> = {}): ShellWorker {
  const w = startShellWorker({
    rootUrl: t.rootUrl,
    credentials: t.root,
    provisionerId: 'tgs-test',
    workerType,
    capacity,
    workerId: `w-${workerType}`,
    workDir,
    logIntervalMs: 200,
    log: () => undefined,
    ...extra,
  });
  workers.push(w);
  return w;
}

const createTask = (workerType: string, payload: unknown, extra: Record<string, unknown> = {}) => createTestTask(t, workerType, payload, extra);

/**
 * The directory of a task's running run. The test talks to a sandboxed task through files there: the task sees
 * nothing else of the machine's filesystem.
 */
const runDirs = (taskId: string) => readdirSync(workDir).filter((d) => d.startsWith(`tgs-task-${taskId}-`));
function runDir(taskId: string): string {
  const dirs = runDirs(taskId);
  assert.equal(dirs.length, 1, `one directory of ${taskId} in ${workDir}: ${dirs.join(', ')}`);
  return path.join(workDir, dirs[0]);
}

async function status(taskId: string): Promise<{ state: string; runs: { state: string; reasonResolved?: string; workerId?: string }[] }> {
  return (await t.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status;
}

function resolved(taskId: string, runs = 1) {
  return eventually(async () => {
    const s = await status(taskId);
    return s.runs.length >= runs && s.runs[runs - 1].state !== 'running' && s.runs[runs - 1].state !== 'pending' && s;
  }, `task ${taskId} run ${runs - 1} resolved`);
}

/** An artifact of the latest run, anonymously (public/ names), following the redirect to the signed URL. */
async function artifact(taskId: string, name: string): Promise<{ status: number; text: string; contentType: string | null }> {
  const res = await fetch(`${t.rootUrl}/api/queue/v1/task/${taskId}/artifacts/${name}`);
  return { status: res.status, text: await res.text(), contentType: res.headers.get('content-type') };
}

test('argv command with env in a fresh working directory: completed, log and artifacts uploaded, directory removed', async () => {
  worker('ok');
  const taskId = await createTask('ok', {
    command: ['node', '-e', 'const fs = require("fs"); fs.mkdirSync("out"); fs.writeFileSync("out/result.json", JSON.stringify({greeting: process.env.GREETING, task: process.env.TASK_ID, cwd: process.cwd()})); fs.writeFileSync("notes.txt", "plain"); console.log("to stdout"); console.error("to stderr"); console.log("secret=" + (process.env.TGS_ACCESS_TOKEN ?? "none"))'],
    env: { GREETING: 'hello' },
    maxRunTime: 60,
    artifacts: [
      { name: 'public/result.json', path: 'out/result.json', type: 'file' },
      { name: 'public/notes', path: 'notes.txt', type: 'file', contentType: 'text/x-notes' },
    ],
  });
  const s = await resolved(taskId);
  assert.equal(s.state, 'completed');
  assert.equal(s.runs[0].workerId, 'w-ok');

  const result = await artifact(taskId, 'public/result.json');
  assert.equal(result.status, 200);
  assert.equal(result.contentType, 'application/json');
  const body = JSON.parse(result.text) as { greeting: string; task: string; cwd: string };
  assert.equal(body.greeting, 'hello');
  assert.equal(body.task, taskId);
  assert.equal(path.dirname(body.cwd), workDir);
  assert.ok(!existsSync(body.cwd), 'the working directory is removed after the run');

  const notes = await artifact(taskId, 'public/notes');
  assert.equal(notes.text, 'plain');
  assert.equal(notes.contentType, 'text/x-notes');

  const log = await artifact(taskId, 'public/logs/live.log');
  assert.equal(log.status, 200);
  assert.match(log.contentType ?? '', /^text\/plain/);
  assert.match(log.text, /to stdout/);
  assert.match(log.text, /to stderr/);
  assert.match(log.text, /secret=none/, 'the worker credentials are not passed to tasks');
  assert.match(log.text, /exit code 0/);
  assert.match(log.text, /artifact public\/result\.json: uploaded/);
  assert.match(log.text, /resolved: completed/);
});

test('a string command runs in the shell; a non-zero exit fails the run; a missing artifact is an error artifact', async () => {
  worker('fail');
  const taskId = await createTask('fail', {
    command: 'echo "shell $((6 * 7))" && exit 3',
    maxRunTime: 60,
    artifacts: [{ name: 'public/missing.txt', path: 'nope.txt', type: 'file' }],
  });
  const s = await resolved(taskId);
  assert.equal(s.state, 'failed');
  const log = await artifact(taskId, 'public/logs/live.log');
  assert.match(log.text, /shell 42/);
  assert.match(log.text, /exit code 3/);
  assert.match(log.text, /resolved: failed/);
  const missing = await t.request('GET', `/api/queue/v1/task/${taskId}/artifacts/public/missing.txt`, undefined, null);
  assert.equal(missing.status, 424);
  assert.match(missing.body.message, /nope\.txt does not exist/);

  // exit 0 but a declared file missing: the run fails too
  const second = await createTask('fail', { command: ['true'], maxRunTime: 60, artifacts: [{ name: 'public/a', path: 'a', type: 'file' }] });
  assert.equal((await resolved(second)).state, 'failed');

  // a program that does not exist: failed, and the log says why
  const third = await createTask('fail', { command: ['no-such-program-tgs'], maxRunTime: 60 });
  assert.equal((await resolved(third)).state, 'failed');
  // the sandbox starts, then finds no such program inside it (bwrap's own exec, or its network prelude's)
  assert.match((await artifact(third, 'public/logs/live.log')).text, /no-such-program-tgs: (No such file or directory|not found)/);
});

test('maxRunTime kills the command (and what it started) and fails the run', async () => {
  // unsandboxed, so its pid is the machine's; the sandboxes' kill is test/security/sandbox.test.ts's
  worker('slow', 1, { isolation: 'none' });
  const pidFile = path.join(scratch, 'slow.pid');
  const taskId = await createTask('slow', { command: `sleep 300 & echo $! > ${pidFile}; echo started; wait`, maxRunTime: 1 });
  const s = await resolved(taskId);
  assert.equal(s.state, 'failed');
  const log = await artifact(taskId, 'public/logs/live.log');
  assert.match(log.text, /started/);
  assert.match(log.text, /maxRunTime of 1 s exceeded: killed the command/);
  const pid = Number(readFileSync(pidFile, 'utf8'));
  // gone, or a zombie waiting for its new parent to reap it: not running any more
  const state = () => {
    try {
      return /^\d+ \(.*\) (\S)/.exec(readFileSync(`/proc/${pid}/stat`, 'utf8'))?.[1];
    } catch {
      return 'gone';
    }
  };
  await eventually(async () => state() === 'gone' || state() === 'Z', 'the background process of the command to be killed too');
});

test('the live log is readable while the task runs; a run longer than the claim is reclaimed', async () => {
  worker('live');
  const taskId = await createTask('live', {
    command: ['node', '-e', 'console.log("first line"); const fs = require("fs"); const t = setInterval(() => { if (fs.existsSync("live.go")) { clearInterval(t); console.log("last line"); } }, 50)'],
    maxRunTime: 120,
  });
  await eventually(async () => (await artifact(taskId, 'public/logs/live.log')).text.includes('first line'), 'first line in the live log');
  assert.equal((await status(taskId)).state, 'running');
  const early = await artifact(taskId, 'public/logs/live.log');
  assert.doesNotMatch(early.text, /^last line$/m);
  // outlive the 3 s claim: without reclaims the run would be resolved claim-expired by the sweep
  const claimedUntil = Date.parse((await t.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status.runs[0].takenUntil);
  await eventually(async () => Date.now() > claimedUntil + 1000 && (await status(taskId)).state === 'running', 'the first claim to pass with the run still running', 15_000);
  writeFileSync(path.join(runDir(taskId), 'live.go'), '');
  const s = await resolved(taskId);
  assert.equal(s.state, 'completed', `${JSON.stringify(s)}\n${(await artifact(taskId, 'public/logs/live.log')).text}`);
  assert.equal(s.runs.length, 1);
  assert.match((await artifact(taskId, 'public/logs/live.log')).text, /^first line\nlast line$/m);
});

test('capacity: that many tasks run at once', async () => {
  worker('pair', 2);
  const command = ['node', '-e', 'const t = setInterval(() => { if (require("fs").existsSync("pair.go")) clearInterval(t); }, 50)'];
  const a = await createTask('pair', { command, maxRunTime: 120 });
  const b = await createTask('pair', { command, maxRunTime: 120 });
  await eventually(async () => (await status(a)).state === 'running' && (await status(b)).state === 'running', 'both tasks running together');
  // a run is `running` from its claim on; its directory comes a moment later
  for (const taskId of [a, b]) writeFileSync(path.join(await eventually(async () => runDirs(taskId).length === 1 && runDir(taskId), `the directory of ${taskId}`), 'pair.go'), '');
  assert.equal((await resolved(a)).state, 'completed');
  assert.equal((await resolved(b)).state, 'completed');
});

/** How many requests the API in this process answered for an endpoint (its metric), with this status. */
async function answered(method: string, status: string): Promise<number> {
  const { values } = await httpDuration.get();
  return values
    .filter((v) => v.metricName === 'tgs_http_request_duration_seconds_count' && v.labels.method === method && v.labels.status === status)
    .reduce((n, v) => n + v.value, 0);
}

test('with claimWork, runs that end together are reported in one reportResolutions call, also by a worker client with worker scopes only', async () => {
  const command = ['node', '-e', ''];
  const batchedBefore = { batch: await answered('reportResolutions', '200'), single: await answered('reportCompleted', '200') };
  // created before the worker starts: one claimWork takes all three, they run side by side
  const ids = [await createTask('batched', { command, maxRunTime: 60 }), await createTask('batched', { command, maxRunTime: 60 }), await createTask('batched', { command, maxRunTime: 60 })];
  worker('batched', 3, { transport: 'claimWork' });
  for (const taskId of ids) {
    const s = await resolved(taskId);
    assert.equal(s.state, 'completed', `${JSON.stringify(s)}\n${(await artifact(taskId, 'public/logs/live.log')).text}`);
  }
  const batches = (await answered('reportResolutions', '200')) - batchedBefore.batch;
  assert.ok(batches >= 1 && batches <= 3, `${batches} batches`);
  assert.equal(await answered('reportCompleted', '200'), batchedBefore.single, 'no single reports');

  // the scopes `tgs dev` gives its workers: claims and worker ids, no queue:resolve-task; the worker-id of the
  // worker that claimed a run authorizes its item
  const clientId = 'shell/least-privilege';
  const expires = new Date(Date.now() + 3600_000).toISOString();
  const created = await t.request('PUT', `/api/auth/v1/clients/${encodeURIComponent(clientId)}`, {
    description: 'a worker client with least privilege',
    expires,
    scopes: ['queue:claim-work:tgs-test/single', 'queue:worker-id:tgs-shell/*'],
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const lines: string[] = [];
  const before = { batch: await answered('reportResolutions', '200'), refused: await answered('reportResolutions', '403'), single: await answered('reportCompleted', '200') };
  const single = [await createTask('single', { command, maxRunTime: 60 }), await createTask('single', { command, maxRunTime: 60 })];
  worker('single', 2, { credentials: { clientId, accessToken: created.body.accessToken }, log: (line) => lines.push(line), transport: 'claimWork' });
  for (const taskId of single) assert.equal((await resolved(taskId)).state, 'completed');
  const later = await createTask('single', { command, maxRunTime: 60 });
  assert.equal((await resolved(later)).state, 'completed');
  assert.equal((await answered('reportCompleted', '200')) - before.single, 0, 'no single reports');
  assert.equal((await answered('reportResolutions', '403')) - before.refused, 0, 'no refused batch');
  const sent = (await answered('reportResolutions', '200')) - before.batch;
  assert.ok(sent >= 2 && sent <= 3, `${sent} batches`);
  assert.deepEqual(lines.filter((l) => l.startsWith('reporting each run with its own call')), []);
});

test('on the worker stream (the default) a worker with worker scopes only gets its tasks pushed and reports them there: no claimWork, no report request', async () => {
  const clientId = 'shell/stream';
  const created = await t.request('PUT', `/api/auth/v1/clients/${encodeURIComponent(clientId)}`, {
    description: 'a worker client with least privilege',
    expires: new Date(Date.now() + 3600_000).toISOString(),
    scopes: ['queue:claim-work:tgs-test/streamed', 'queue:worker-id:tgs-shell/*'],
  });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  // the workers of the tests before, claimWork ones, stop: their long-polls would count
  await Promise.all(workers.splice(0).map((w) => w.stop()));
  const counts = async () => ({
    claimWork: await answered('claimWork', '200'),
    batch: await answered('reportResolutions', '200'),
    single: await answered('reportCompleted', '200'),
    failed: await answered('reportFailed', '200'),
  });
  const before = await counts();
  const lines: string[] = [];
  worker('streamed', 2, { credentials: { clientId, accessToken: created.body.accessToken }, log: (line) => lines.push(line) });
  const command = ['node', '-e', ''];
  const ids = [await createTask('streamed', { command, maxRunTime: 60 }), await createTask('streamed', { command: ['false'], maxRunTime: 60 }), await createTask('streamed', { command, maxRunTime: 60 })];
  assert.deepEqual(await Promise.all(ids.map(async (id) => (await resolved(id)).state)), ['completed', 'failed', 'completed']);
  assert.deepEqual(await counts(), before, 'every claim and report went over the stream');
  assert.ok(lines.some((l) => /over the worker stream/.test(l)), lines.join('\n'));
  for (const id of ids) assert.equal((await status(id)).runs[0].workerId, 'w-streamed');
});

test('against an API without the worker stream (404 to the upgrade) the worker claims with claimWork', async () => {
  // a front that passes every request on to the API and answers the upgrade 404, as an older tgs or a Taskcluster queue would
  const front = http.createServer((req, res) => {
    const forward = http.request(new URL(req.url ?? '/', t.rootUrl), { method: req.method, headers: req.headers }, (answer) => {
      res.writeHead(answer.statusCode ?? 502, answer.headers);
      answer.pipe(res);
    });
    req.pipe(forward);
  });
  front.on('upgrade', (_req, socket) => {
    const body = JSON.stringify({ code: 'ResourceNotFound', message: 'No such endpoint' });
    socket.end(`HTTP/1.1 404 Not Found\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\nconnection: close\r\n\r\n${body}`);
  });
  await new Promise<void>((resolve) => front.listen(0, '127.0.0.1', resolve));
  const port = (front.address() as AddressInfo).port;
  try {
    const lines: string[] = [];
    const claimsBefore = await answered('claimWork', '200');
    // the front signs for its own host: the API checks Hawk against the Host header it receives
    worker('fronted', 1, { rootUrl: `http://127.0.0.1:${port}`, log: (line) => lines.push(line) });
    const taskId = await createTask('fronted', { command: ['node', '-e', ''], maxRunTime: 60 });
    assert.equal((await resolved(taskId)).state, 'completed');
    assert.ok(lines.some((l) => /has no worker stream: claiming with claimWork/.test(l)), lines.join('\n'));
    assert.ok((await answered('claimWork', '200')) > claimsBefore);
  } finally {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    front.closeAllConnections();
    await new Promise((resolve) => front.close(resolve));
  }
});

test('a malformed payload: exception malformed-payload, the reason in the log, not retried', async () => {
  worker('bad');
  const taskId = await createTask('bad', { command: 42, maxRunTime: 'soon', extra: true });
  const s = await resolved(taskId);
  assert.equal(s.state, 'exception');
  assert.equal(s.runs.length, 1);
  assert.equal(s.runs[0].reasonResolved, 'malformed-payload');
  const log = await artifact(taskId, 'public/logs/live.log');
  assert.match(log.text, /not valid for tgs shell-worker/);
  assert.match(log.text, /payload has unknown property "extra"/);
  assert.match(log.text, /payload\.maxRunTime must be integer/);
  assert.match(log.text, /For example:/);
});

/** Resolves a task that must end exception malformed-payload (not retried); answers its live log. */
async function malformed(taskId: string): Promise<string> {
  const s = await resolved(taskId);
  assert.equal(s.state, 'exception');
  assert.equal(s.runs.length, 1, 'not retried');
  assert.equal(s.runs[0].reasonResolved, 'malformed-payload');
  return (await artifact(taskId, 'public/logs/live.log')).text;
}

/** 404: the artifact was never created. */
async function absent(taskId: string, name: string) {
  assert.equal((await t.request('GET', `/api/queue/v1/task/${taskId}/artifacts/${name}`, undefined, null)).status, 404, `${name} was not created`);
}

test('an absolute artifact path is malformed-payload: the command does not run, nothing is uploaded', async () => {
  worker('abs-path');
  const ran = path.join(scratch, 'abs-path.ran');
  const taskId = await createTask('abs-path', {
    command: `touch ${ran}`,
    maxRunTime: 60,
    artifacts: [{ name: 'public/passwd', path: '/etc/passwd', type: 'file' }],
  });
  const log = await malformed(taskId);
  assert.match(log, /payload\.artifacts\[0\] \(public\/passwd\): path "\/etc\/passwd" is absolute/);
  assert.ok(!existsSync(ran), 'the command did not run');
  await absent(taskId, 'public/passwd');
});

test('an artifact path with `..` is malformed-payload', async () => {
  worker('dotdot-path');
  const taskId = await createTask('dotdot-path', {
    command: 'true',
    maxRunTime: 60,
    artifacts: [
      { name: 'public/fine.txt', path: 'fine.txt', type: 'file' },
      { name: 'public/up', path: 'sub/../../other-task/out.txt', type: 'file' },
    ],
  });
  const log = await malformed(taskId);
  assert.match(log, /payload\.artifacts\[1\] \(public\/up\): path "sub\/\.\.\/\.\.\/other-task\/out\.txt" contains `\.\.`/);
  await absent(taskId, 'public/up');
  // a name that merely contains two dots is a file name like any other
  assert.ok('payload' in parseShellPayload({ command: 'true', maxRunTime: 5, artifacts: [{ name: 'public/a', path: 'v1..2.txt', type: 'file' }] }));
});

test('an artifact path whose symlink leads out of the task directory is malformed-payload; one staying inside is uploaded', async () => {
  worker('symlink-path');
  const secret = path.join(scratch, 'worker-secret.txt');
  writeFileSync(secret, 'the worker-only secret');
  const taskId = await createTask('symlink-path', {
    command: `echo inside > real.txt && ln -s real.txt inner.txt && mkdir d && ln -s ${secret} d/out.txt`,
    maxRunTime: 60,
    artifacts: [
      { name: 'public/inner.txt', path: 'inner.txt', type: 'file' },
      { name: 'public/out.txt', path: 'd/out.txt', type: 'file' },
    ],
  });
  const log = await malformed(taskId);
  assert.match(log, new RegExp(`artifact public/out\\.txt: path "d/out\\.txt" leads out of the task's directory \\(to ${secret.replace(/[.]/g, '\\.')}\\)`));
  assert.doesNotMatch(log, /worker-only secret/);
  await absent(taskId, 'public/out.txt');
  await absent(taskId, 'public/inner.txt');

  // the same symlink to a file inside the directory is fine
  const ok = await createTask('symlink-path', {
    command: 'echo inside > real.txt && ln -s real.txt inner.txt',
    maxRunTime: 60,
    artifacts: [{ name: 'public/inner.txt', path: 'inner.txt', type: 'file' }],
  });
  assert.equal((await resolved(ok)).state, 'completed');
  assert.equal((await artifact(ok, 'public/inner.txt')).text, 'inside\n');
});

test('an artifact larger than --max-artifact-size is refused before a byte is read (a 1.5 GB sparse file); a hard link is refused', async () => {
  worker('big-artifact', 1, { maxArtifactBytes: 1024 * 1024 });
  const rssBefore = process.memoryUsage().rss;
  const taskId = await createTask('big-artifact', {
    command: 'truncate -s 1500M big.bin && echo small > small.txt && ln small.txt linked.txt && echo ok > ok.txt',
    maxRunTime: 60,
    artifacts: [
      { name: 'public/big.bin', path: 'big.bin', type: 'file' },
      { name: 'public/linked.txt', path: 'linked.txt', type: 'file' },
      { name: 'public/ok.txt', path: 'ok.txt', type: 'file' },
    ],
  });
  const s = await resolved(taskId);
  assert.equal(s.state, 'failed');
  const log = (await artifact(taskId, 'public/logs/live.log')).text;
  assert.match(log, /artifact public\/big\.bin: big\.bin holds 1572864000 bytes, more than this worker uploads \(--max-artifact-size 1048576\); nothing was read/);
  assert.match(log, /artifact public\/linked\.txt: linked\.txt is not the run's own file: it has 2 names \(a hard link\); nothing was read/);
  const big = await t.request('GET', `/api/queue/v1/task/${taskId}/artifacts/public/big.bin`, undefined, null);
  assert.equal(big.status, 424);
  assert.match(big.body.message, /more than this worker uploads/);
  assert.equal((await artifact(taskId, 'public/ok.txt')).text, 'ok\n', 'the others are uploaded, streamed from the file');
  // read whole, the sparse file took a worker from 110 MB to 6.2 GB
  assert.ok(process.memoryUsage().rss - rssBefore < 256 * 1024 * 1024, `the worker did not read the big file (RSS +${Math.round((process.memoryUsage().rss - rssBefore) / 1e6)} MB)`);
});

test('openConfined: only a regular file of the run\'s own uid with one name, within the size bound, is opened; the size comes from the opened file', async () => {
  const dir = realpathSync(mkdtempSync(path.join(scratch, 'confine-')));
  writeFileSync(path.join(dir, 'mine.txt'), 'mine');
  writeFileSync(path.join(dir, 'root.txt'), 'not the run\'s');
  const uid = 1565000;
  chownSync(path.join(dir, 'mine.txt'), uid, uid);
  const opened = await openConfined(dir, 'mine.txt', { uid, maxBytes: 4 });
  assert.equal(opened.kind, 'file');
  if (opened.kind === 'file') {
    assert.equal(opened.size, 4);
    await opened.handle.close();
  }
  assert.deepEqual(await openConfined(dir, 'mine.txt', { uid, maxBytes: 3 }), { kind: 'too-large', size: 4 });
  assert.deepEqual(await openConfined(dir, 'root.txt', { uid, maxBytes: 100 }), { kind: 'not-the-runs', why: `uid 0 owns it, not the run (uid ${uid})` });
  linkSync(path.join(dir, 'mine.txt'), path.join(dir, 'again.txt'));
  assert.deepEqual(await openConfined(dir, 'mine.txt', { uid, maxBytes: 100 }), { kind: 'not-the-runs', why: 'it has 2 names (a hard link)' });
});

test('parseShellPayload fills defaults and rejects bad artifacts', () => {
  assert.deepEqual(parseShellPayload({ command: 'true', maxRunTime: 5 }), { payload: { command: 'true', maxRunTime: 5, env: {}, artifacts: [] } });
  const bad = parseShellPayload({ command: [], maxRunTime: 5, artifacts: [{ name: '/abs', path: 'x', type: 'directory' }] });
  assert.ok('error' in bad);
  assert.match(bad.error, /payload\.command/);
  assert.match(bad.error, /payload\.artifacts\.0\.name/);
  assert.match(bad.error, /payload\.artifacts\.0\.type/);
  assert.ok('error' in parseShellPayload({ command: 'x' }), 'maxRunTime is required');
});

test('SIGTERM to `tgs shell-worker`: it drains; a task still running at the drain timeout is reported worker-shutdown and the queue retries it', async () => {
  // This one is about the shutdown report, not reclaims: against an API with 60 s claims, a child process starved
  // of CPU (two slow cores, three test files at once) cannot lose its claim to the sweep before the SIGTERM, as it
  // did with the file's 3 s claims (resolved claim-expired).
  const shortClaims = t;
  t = await startTestApi({ claimWorkWaitMs: 1000, claimTimeoutSeconds: 60 });
  try {
    await sigtermTest();
  } finally {
    await Promise.all(workers.splice(0).map((w) => w.stop()));
    await t.close();
    t = shortClaims;
  }
});

async function sigtermTest() {
  // the first run works until the worker stops; the retry ends at once
  const taskId = await createTask('term', {
    command: ['node', '-e', 'if (process.env.RUN_ID !== "0") process.exit(0); console.log("working"); setInterval(() => undefined, 50)'],
    maxRunTime: 120,
  }, { retries: 2 });
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/cli/entry.ts', 'shell-worker', '--provisioner-id', 'tgs-test', '--worker-type', 'term', '--worker-id', 'child', '--work-dir', workDir, '--drain-timeout', '2'],
    { cwd: repo, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', TGS_ROOT_URL: t.rootUrl, TGS_CLIENT_ID: t.root.clientId, TGS_ACCESS_TOKEN: t.root.accessToken }, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let output = '';
  child.stdout.on('data', (d: Buffer) => (output += d.toString()));
  child.stderr.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  try {
    await eventually(async () => (await artifact(taskId, 'public/logs/live.log')).text.includes('working'), 'the task to run in the child worker');
    const before = readdirSync(workDir).length;
    assert.ok(before >= 1);
    const signaled = Date.now();
    child.kill('SIGTERM');
    assert.equal(await exited, 0, output);
    assert.ok(Date.now() - signaled >= 1900, 'the task had its drain timeout');
  } finally {
    if (child.exitCode === null) child.kill('SIGKILL');
  }
  assert.match(output, /SIGTERM, draining/);
  assert.match(output, /draining: no more claims; 1 task\(s\) running may finish within the drain timeout of 2 s/);
  assert.match(output, /drain timeout of 2 s reached: 1 task\(s\) still running/);
  assert.match(output, /drained in [\d.]+ s: of 1 task\(s\) running, 1 reported worker-shutdown/);
  const s = await status(taskId);
  assert.equal(s.runs[0].state, 'exception');
  assert.equal(s.runs[0].reasonResolved, 'worker-shutdown');
  assert.equal(s.state, 'pending', 'retried: a new run waits for a worker');
  assert.equal(s.runs.length, 2);
  const log = (await fetch(`${t.rootUrl}/api/queue/v1/task/${taskId}/runs/0/artifacts/public/logs/live.log`).then((r) => r.text()));
  assert.match(log, /the worker is shutting down/);
  assert.match(log, /resolved: exception worker-shutdown/);
  assert.ok(!readdirSync(workDir).some((d) => d.includes(taskId)), 'its working directory is removed');

  // another worker takes the retry to the end
  worker('term');
  const done = await resolved(taskId, 2);
  assert.equal(done.state, 'completed');
}
