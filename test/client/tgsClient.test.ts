import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import slugid from 'slugid';
import { startShellWorker, type ShellWorker } from '../../src/shellWorker/index.js';
import { GraphNotFinishedError, TgsApiError, TgsClient, type GraphInfo, type TaskGraph } from '../../src/index.js';
import { useStack } from '../helpers/stackFixture.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));
const run = promisify(execFile);

const stack = useStack();
let worker: ShellWorker;
let client: TgsClient;
let dir: string;

stack.onStart(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'tgs-client-'));
  worker = startShellWorker({
    rootUrl: stack.api.rootUrl,
    credentials: stack.api.root,
    provisionerId: 'tgs-test',
    workerType: 'client',
    capacity: 4,
    logIntervalMs: 300,
    log: () => undefined,
    // the tests hold and release tasks through files in their directory, which only unsandboxed runs share
    isolation: 'none',
  });
  client = new TgsClient({ rootUrl: `${stack.api.rootUrl}/`, credentials: stack.api.root });
});
stack.onStop(async () => {
  await worker.stop();
});
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

function task(command: string, extra: Record<string, unknown> = {}) {
  const now = Date.now();
  return {
    provisionerId: 'tgs-test',
    workerType: 'client',
    created: new Date(now).toISOString(),
    deadline: new Date(now + 3600_000).toISOString(),
    payload: { command, maxRunTime: 60, ...extra },
    metadata: { name: 'client test', description: 'TgsClient test task', owner: 'tests@example.com', source: 'https://example.com/tgs' },
  };
}

test('submitGraph, waitForGraph (progress until finished), graphStatus, inspect, task and artifact reads', async () => {
  const graph: TaskGraph = {
    routing: 'client',
    tasks: {
      make: { task: task('printf "%s" "$GREETING" > greeting.txt', { env: { GREETING: 'hi there' }, artifacts: [{ name: 'public/greeting.txt', path: 'greeting.txt', type: 'file' }] }) },
      use: { requires: ['make'], task: task('echo "made by $MAKE"', { env: { MAKE: { $subs: 'taskId:make' } } }) },
    },
  };
  const submitted = await client.submitGraph(graph);
  assert.match(submitted.taskGraphId, /^[A-Za-z0-9_-]{22}$/);
  assert.deepEqual(submitted.tasks.map((t) => t.label).sort(), ['make', 'use']);
  assert.equal(submitted.status.state, 'running');
  assert.equal(client.graphUrl(submitted.taskGraphId), `${stack.api.rootUrl}/ui/task-graph/${submitted.taskGraphId}`);

  const seen: GraphInfo[] = [];
  const info = await client.waitForGraph(submitted.taskGraphId, { onProgress: (i) => void seen.push(i) });
  assert.equal(info.status.state, 'finished');
  assert.equal(info.counts.completed, 2);
  assert.equal(seen.at(-1)?.status.state, 'finished');
  assert.ok(seen.length >= 1);

  const status = await client.graphStatus(submitted.taskGraphId);
  assert.deepEqual(status, { schedulerId: stack.config.schedulerId, taskGraphId: submitted.taskGraphId, state: 'finished', routing: 'client' });
  const tasks = await client.inspect(submitted.taskGraphId);
  assert.deepEqual(tasks.map((t) => [t.label, t.state]), [['make', 'completed'], ['use', 'completed']]);
  const make = await client.inspect(submitted.taskGraphId, 'make');
  assert.deepEqual(make.dependents, ['use']);

  const ts = await client.taskStatus(make.taskId);
  assert.equal(ts.state, 'completed');
  assert.equal(ts.runs[0].workerGroup, 'tgs-shell');
  assert.equal((await client.task(make.taskId)).taskGroupId, submitted.taskGraphId);
  const names = (await client.listArtifacts(make.taskId)).map((a) => a.name).sort();
  assert.deepEqual(names, ['public/greeting.txt', 'public/logs/live.log']);
  assert.deepEqual(await client.listArtifacts(make.taskId, { runId: 0 }).then((a) => a.length), 2);
  const greeting = await client.artifact(make.taskId, 'public/greeting.txt');
  assert.equal(greeting.data.toString(), 'hi there');
  assert.equal(greeting.contentType, 'text/plain; charset=utf-8');
  const useLog = await client.artifact((await client.inspect(submitted.taskGraphId, 'use')).taskId, 'public/logs/live.log', { runId: 0 });
  assert.match(useLog.data.toString(), new RegExp(`made by ${make.taskId}`));
  const anonymous = await fetch(client.artifactUrl(make.taskId, 'public/greeting.txt'));
  assert.equal(await anonymous.text(), 'hi there');

  await assert.rejects(client.artifact(make.taskId, 'public/nothing'), (err: unknown) => err instanceof TgsApiError && err.status === 404);
  await assert.rejects(client.graphStatus(slugid.nice()), (err: unknown) => err instanceof TgsApiError && err.status === 404 && err.code === 'ResourceNotFound');
});

test('waitForGraph rejects with the blocking task when the graph blocks; rerun lets it finish', async () => {
  const marker = path.join(dir, 'fixed');
  const submitted = await client.submitGraph({
    tasks: {
      first: { task: task('true') },
      flaky: { requires: ['first'], task: task(`test -f ${marker} && echo ok > report`, { artifacts: [{ name: 'private/report', path: 'report', type: 'file' }] }) },
    },
  });
  const err = await client.waitForGraph(submitted.taskGraphId).then(
    () => assert.fail('the graph should block'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof GraphNotFinishedError);
  assert.equal(err.state, 'blocked');
  assert.equal(err.taskGraphId, submitted.taskGraphId);
  assert.deepEqual(err.blocking.map((t) => [t.label, t.state]), [['flaky', 'failed']]);
  assert.match(err.message, /is blocked by flaky \(\S{22}, failed\)/);
  const flakyId = err.blocking[0].taskId;
  await assert.rejects(client.artifact(flakyId, 'private/report'), (e: unknown) => e instanceof TgsApiError && e.status === 424 && /file-missing-on-worker/.test(e.message));

  await assert.rejects(client.rerun(submitted.taskGraphId, 'nosuch'), (e: unknown) => e instanceof TgsApiError && e.status === 404);
  writeFileSync(marker, '');
  assert.equal((await client.rerun(submitted.taskGraphId, 'flaky')).accepted, true);
  const info = await client.waitForGraph(submitted.taskGraphId);
  assert.equal(info.status.state, 'finished');
  assert.equal((await client.taskStatus(flakyId)).runs.length, 2);
  assert.equal((await client.artifact(flakyId, 'private/report')).data.toString(), 'ok\n');
});

test('extendGraph adds tasks that require existing labels; cancel makes waitForGraph reject with canceled', async () => {
  const gate = path.join(dir, 'gate');
  const submitted = await client.submitGraph({ tasks: { hold: { task: task(`while [ ! -f ${gate} ]; do sleep 0.1; done`) } } });
  const extended = await client.extendGraph(submitted.taskGraphId, { tasks: { next: { requires: ['hold'], task: task('true') } } });
  assert.deepEqual(extended.tasks.map((t) => t.label), ['next']);
  assert.equal((await client.inspect(submitted.taskGraphId)).length, 2);

  const abort = new AbortController();
  const waiting = client.waitForGraph(submitted.taskGraphId, { signal: abort.signal });
  abort.abort(new Error('stop waiting'));
  await assert.rejects(waiting, /stop waiting/);

  const status = await client.cancel(submitted.taskGraphId);
  assert.equal(status.state, 'canceled');
  const err = await client.waitForGraph(submitted.taskGraphId).catch((e: unknown) => e);
  assert.ok(err instanceof GraphNotFinishedError);
  assert.equal(err.state, 'canceled');
  writeFileSync(gate, '');
});

test('queue task calls: cancelTask, rerunTask', async () => {
  const taskId = slugid.nice();
  await stack.root.request('queue', 'PUT', `/task/${taskId}`, { ...task('true'), workerType: 'nobody' });
  const canceled = await client.cancelTask(taskId);
  assert.equal(canceled.state, 'exception');
  assert.equal(canceled.runs[0].reasonResolved, 'canceled');
  const rerun = await client.rerunTask(taskId);
  assert.equal(rerun.state, 'pending');
  assert.equal(rerun.runs.length, 2);
  const anonymous = new TgsClient({ rootUrl: stack.api.rootUrl });
  await assert.rejects(anonymous.cancelTask(taskId), (e: unknown) => e instanceof TgsApiError && e.status === 403 && /queue:cancel-task:/.test(e.message));
  const unreachable = new TgsClient({ rootUrl: 'http://127.0.0.1:9' });
  await assert.rejects(unreachable.graphStatus(taskId), (e: unknown) => e instanceof TgsApiError && e.status === 0 && /cannot reach/.test(e.message));
  const fromEnv = TgsClient.fromEnvironment({ TGS_ROOT_URL: stack.api.rootUrl, TGS_CLIENT_ID: stack.api.root.clientId, TGS_ACCESS_TOKEN: stack.api.root.accessToken });
  assert.equal((await fromEnv.taskStatus(taskId)).taskId, taskId);
});

test('reportResolutions: one answer per run, a status or the refusal the single report would give', async () => {
  const taskId = slugid.nice();
  await stack.root.request('queue', 'PUT', `/task/${taskId}`, { ...task('true'), workerType: 'client-batch' });
  const claimed = await stack.root.request('queue', 'POST', '/claim-work/tgs-test/client-batch', { workerGroup: 'g', workerId: 'w', tasks: 1 });
  assert.equal(claimed.tasks[0].status.taskId, taskId);
  const unknown = slugid.nice();
  const answers = await client.reportResolutions([
    { taskId, runId: 0, outcome: 'exception', reason: 'malformed-payload' },
    { taskId: unknown, runId: 0, outcome: 'completed' },
  ]);
  assert.equal(answers.length, 2);
  assert.ok('status' in answers[0] && answers[0].status.runs[0].reasonResolved === 'malformed-payload', JSON.stringify(answers[0]));
  assert.ok('error' in answers[1] && answers[1].error.code === 'ResourceNotFound' && answers[1].taskId === unknown, JSON.stringify(answers[1]));
  const anonymous = new TgsClient({ rootUrl: stack.api.rootUrl });
  await assert.rejects(anonymous.reportResolutions([{ taskId, runId: 0, outcome: 'completed' }]), (e: unknown) => e instanceof TgsApiError && e.status === 403);
});

test("the package: `npm run build`'s tsconfig emits dist/index.js and index.d.ts, and `import { TgsClient } from 'tgs'` works and typechecks", async () => {
  // an install of the package as a consumer sees it: node_modules/tgs with package.json and the built dist/
  const pkg = path.join(dir, 'consumer', 'node_modules', 'tgs');
  mkdirSync(pkg, { recursive: true });
  await run(process.execPath, [path.join(repo, 'node_modules/typescript/bin/tsc'), '-p', path.join(repo, 'tsconfig.build.json'), '--outDir', path.join(pkg, 'dist')], { cwd: repo });
  cpSync(path.join(repo, 'package.json'), path.join(pkg, 'package.json'));
  symlinkSync(path.join(repo, 'node_modules'), path.join(pkg, 'node_modules'));
  symlinkSync(path.join(repo, 'node_modules/@types'), path.join(dir, 'consumer', 'node_modules', '@types'));
  const consumer = path.join(dir, 'consumer');
  writeFileSync(path.join(consumer, 'package.json'), JSON.stringify({ name: 'consumer', type: 'module', private: true }));
  const program = `
import { TgsClient, GraphNotFinishedError, startTaskGraph, type GraphInfo, type TaskGraph } from 'tgs';
const client = new TgsClient({ rootUrl: process.env.ROOT_URL as string, credentials: { clientId: process.env.CLIENT_ID as string, accessToken: process.env.TOKEN as string } });
const now = Date.now();
const graph: TaskGraph = { tasks: { one: { task: {
  provisionerId: 'tgs-test', workerType: 'client', created: new Date(now).toISOString(), deadline: new Date(now + 3600000).toISOString(),
  payload: { command: ['true'], maxRunTime: 30 }, metadata: { name: 'pkg', description: '', owner: 'o', source: 'https://example.com' } } } } };
const { taskGraphId } = await client.submitGraph(graph);
const info: GraphInfo = await client.waitForGraph(taskGraphId);
console.log(JSON.stringify({ state: info.status.state, blockedError: typeof GraphNotFinishedError, startTaskGraph: typeof startTaskGraph }));
`;
  writeFileSync(path.join(consumer, 'main.ts'), program);
  writeFileSync(
    path.join(consumer, 'tsconfig.json'),
    JSON.stringify({ compilerOptions: { module: 'NodeNext', moduleResolution: 'NodeNext', target: 'ES2022', strict: true, outDir: 'out', types: ['node'], skipLibCheck: true }, files: ['main.ts'] }),
  );
  // typechecks against dist/index.d.ts, and compiles to plain JS that Node runs importing 'tgs' by name
  await run(process.execPath, [path.join(repo, 'node_modules/typescript/bin/tsc'), '-p', consumer], { cwd: consumer }).catch((e: { stdout: string }) => assert.fail(e.stdout));
  const { stdout } = await run(process.execPath, [path.join(consumer, 'out/main.js')], {
    cwd: consumer,
    env: { PATH: process.env.PATH, ROOT_URL: stack.api.rootUrl, CLIENT_ID: stack.api.root.clientId, TOKEN: stack.api.root.accessToken },
  });
  assert.deepEqual(JSON.parse(stdout), { state: 'finished', blockedError: 'function', startTaskGraph: 'function' });
});
