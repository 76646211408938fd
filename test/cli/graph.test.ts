import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import slugid from 'slugid';
import { stringify as toYaml } from 'yaml';
import { startShellWorker, type ShellWorker } from '../../src/shellWorker/index.js';
import { fromNow, withTaskDefaults } from '../../src/cli/graphFile.js';
import { Progress } from '../../src/cli/progress.js';
import type { GraphInfo, GraphState, TgsClient } from '../../src/client/tgsClient.js';
import { useStack } from '../helpers/stackFixture.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));

const stack = useStack();
let worker: ShellWorker;
let dir: string;

stack.onStart(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'tgs-cli-graph-'));
  worker = startShellWorker({
    rootUrl: stack.api.rootUrl,
    credentials: stack.api.root,
    provisionerId: 'tgs-test',
    workerType: 'cli',
    capacity: 4,
    logIntervalMs: 300,
    log: () => undefined,
    // the tests hold and release tasks through files in their directory, which only unsandboxed runs share
    isolation: 'none',
  });
});
stack.onStop(async () => {
  await worker.stop();
});
after(() => {
  rmSync(dir, { recursive: true, force: true });
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/**
 * `tgs <args>` from source with the stack's root credentials (stdout is a pipe: not a TTY). `onStdout` sees the
 * output so far each time more arrives.
 */
function tgs(args: string[], env: Record<string, string> = {}, onStdout?: (soFar: string) => void): Promise<Run> {
  return new Promise((resolve) => {
    let soFar = '';
    const child = execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli/entry.ts', ...args],
      {
        cwd: repo,
        env: {
          PATH: process.env.PATH ?? '',
          HOME: process.env.HOME ?? '',
          TGS_ROOT_URL: stack.api.rootUrl,
          TGS_CLIENT_ID: stack.api.root.clientId,
          TGS_ACCESS_TOKEN: stack.api.root.accessToken,
          ...env,
        },
        timeout: 120_000,
      },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
    child.stdout?.on('data', (d: Buffer) => onStdout?.((soFar += d.toString())));
  });
}

const shellTask = (command: string | string[], extra: Record<string, unknown> = {}) => ({
  provisionerId: 'tgs-test',
  workerType: 'cli',
  payload: { command, maxRunTime: 60, ...extra },
});

function graphFile(name: string, graph: unknown, yaml = false): string {
  const file = path.join(dir, `${name}.${yaml ? 'yaml' : 'json'}`);
  writeFileSync(file, yaml ? toYaml(graph) : JSON.stringify(graph, null, 2));
  return file;
}

const ESC = String.fromCharCode(27);

test('submit --wait: a graph that finishes exits 0, with plain progress lines when stdout is not a TTY', async () => {
  const gate = path.join(dir, 'build-gate');
  const file = graphFile('ok', {
    routing: 'cli',
    metadata: { name: 'cli ok' },
    tasks: {
      build: {
        task: shellTask(`while [ ! -f ${gate} ]; do sleep 0.1; done; echo built > out.txt`, { artifacts: [{ name: 'public/out.txt', path: 'out.txt', type: 'file' }] }),
      },
      test: { requires: ['build'], task: shellTask(['sh', '-c', 'echo "testing $BUILD"'], { env: { BUILD: { $subs: 'taskId:build' } } }) },
      package: { requires: ['test'], task: shellTask('echo packaged') },
    },
  });
  // the build task runs until the progress display has shown it running
  const run = await tgs(['graph', 'submit', file, '--wait'], {}, (soFar) => soFar.includes('running: build') && writeFileSync(gate, ''));
  assert.equal(run.code, 0, run.stdout + run.stderr);
  const id = /task-graph (\S+) submitted \(3 tasks\)/.exec(run.stdout)?.[1];
  assert.ok(id, run.stdout);
  assert.match(run.stdout, new RegExp(`${stack.api.rootUrl}/ui/task-graph/${id}`));
  assert.match(run.stdout, /^\[\d+\.\ds\] running · 3 tasks: 0 completed, 1 running, 2 unscheduled · running: build$/m);
  assert.match(run.stdout, new RegExp(`task-graph ${id} finished: 3 of 3 tasks completed in`));
  assert.ok(!run.stdout.includes(ESC), 'no terminal escapes when stdout is not a TTY');

  // the other read commands on the finished graph
  const status = await tgs(['graph', 'status', id as string]);
  assert.equal(status.code, 0, status.stderr);
  assert.match(status.stdout, /state\s+finished/);
  assert.match(status.stdout, /name\s+cli ok/);
  assert.match(status.stdout, /3 tasks: 3 completed/);
  const inspect = await tgs(['graph', 'inspect', id as string]);
  assert.match(inspect.stdout, /^test\s+\S{22}\s+completed\s+0\/0\s+build$/m);
  const one = await tgs(['graph', 'inspect', id as string, 'test', '--json']);
  const task = JSON.parse(one.stdout) as { taskId: string; dependents: string[] };
  assert.deepEqual(task.dependents, ['package']);

  const buildId = (JSON.parse((await tgs(['graph', 'inspect', id as string, 'build', '--json'])).stdout) as { taskId: string }).taskId;
  const log = await tgs(['task', 'log', task.taskId]);
  assert.equal(log.code, 0, log.stderr);
  assert.match(log.stdout, new RegExp(`^testing ${buildId}$`, 'm'), '$subs put the build taskId into the env');
  const artifacts = await tgs(['task', 'artifacts', buildId]);
  // where the bytes really are (tgs's Postgres, not S3) and the size, read with a HEAD: "built\n" is 6 bytes
  assert.match(artifacts.stdout, /^NAME\s+STORED IN\s+SIZE\s+CONTENT TYPE/m);
  assert.match(artifacts.stdout, /public\/out\.txt\s+tgs's Postgres\s+6 B\s+text\/plain/);
  assert.match(artifacts.stdout, /public\/logs\/live\.log/);
  const got = await tgs(['task', 'artifacts', buildId, '--get', 'public/out.txt']);
  assert.equal(got.stdout, 'built\n');
  const taskStatus = await tgs(['task', 'status', buildId]);
  assert.match(taskStatus.stdout, /state\s+completed/);
  assert.match(taskStatus.stdout, /run 0 {2}completed on tgs-shell\//);
});

test('submit --wait: a blocked graph exits 1 naming the blocking task with the tail of its log; rerun --wait then finishes it', async () => {
  const marker = path.join(dir, 'fixed');
  const file = graphFile('blocked', {
    tasks: {
      prepare: { task: shellTask('echo ready') },
      breaks: {
        requires: ['prepare'],
        reruns: 1,
        task: shellTask(`for i in $(seq 1 40); do echo "line $i"; done; if [ -f ${marker} ]; then echo fixed; else echo "boom: no ${path.basename(marker)} file" >&2; exit 2; fi`),
      },
      after: { requires: ['breaks'], task: shellTask('echo after') },
    },
  }, true);
  const run = await tgs(['graph', 'submit', file, '--wait', '--tail', '5']);
  assert.equal(run.code, 1, run.stdout + run.stderr);
  const id = /task-graph (\S+) submitted/.exec(run.stdout)?.[1] as string;
  assert.match(run.stdout, /is blocked \(3 tasks: 1 completed, 1 unscheduled, 1 failed\)/);
  assert.match(run.stdout, /blocking task: breaks \(\S{22}\), run 1 failed, exit code 2, 1 rerun\(s\) used up/);
  assert.match(run.stdout, /--- last 5 of \d+ lines of public\/logs\/live\.log \(run 1\) ---/);
  assert.match(run.stdout, /boom: no fixed file/);
  assert.doesNotMatch(run.stdout, /^line 30$/m, 'only the tail of the log');
  assert.match(run.stdout, new RegExp(`Rerun it: tgs graph rerun ${id} breaks`));
  assert.match(run.stderr, new RegExp(`tgs: task-graph ${id} is blocked by breaks`));

  writeFileSync(marker, '');
  const rerun = await tgs(['graph', 'rerun', id, 'breaks', '--wait']);
  assert.equal(rerun.code, 0, rerun.stdout + rerun.stderr);
  assert.match(rerun.stdout, /rerun of breaks accepted/);
  assert.match(rerun.stdout, /finished: 3 of 3 tasks completed/);
});

test('an invalid graph is refused with every offending label, and nothing is created', async () => {
  const file = graphFile('invalid', {
    tasks: {
      good: { task: shellTask('true') },
      orphan: { requires: ['nowhere'], task: shellTask('true') },
      bad: { task: { ...shellTask('true'), priority: 'urgent' } },
    },
  });
  const id = slugid.nice();
  const run = await tgs(['graph', 'submit', file, '--id', id, '--wait']);
  assert.equal(run.code, 1);
  assert.match(run.stderr, /InputValidationError|Invalid task-graph/);
  assert.match(run.stderr, /orphan: requires unknown label "nowhere"/);
  assert.match(run.stderr, /- bad: /);
  assert.doesNotMatch(run.stderr, /- good:/);
  const status = await tgs(['graph', 'status', id]);
  assert.equal(status.code, 1);
  assert.match(status.stderr, /ResourceNotFound \(404\)/);

  const missing = await tgs(['graph', 'submit', path.join(dir, 'nope.json')]);
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /cannot read .*nope\.json: no such file/);
  writeFileSync(path.join(dir, 'notgraph.json'), '[1, 2]');
  const notGraph = await tgs(['graph', 'submit', path.join(dir, 'notgraph.json')]);
  assert.match(notGraph.stderr, /must hold an object with "tasks"/);
});

test('errors say what to do next: unreachable server, no credentials, bad credentials', async () => {
  const file = graphFile('tiny', { tasks: { a: { task: shellTask('true') } } });
  const unreachable = await tgs(['graph', 'submit', file, '--wait'], { TGS_ROOT_URL: 'http://127.0.0.1:9' });
  assert.equal(unreachable.code, 1);
  assert.match(unreachable.stderr, /cannot reach http:\/\/127\.0\.0\.1:9 .*is `tgs api` or `tgs dev` running/);
  const statusUnreachable = await tgs(['graph', 'status', slugid.nice()], { TGS_ROOT_URL: 'http://127.0.0.1:9' });
  assert.match(statusUnreachable.stderr, /cannot reach/);
  const anonymous = await tgs(['graph', 'submit', file], { TGS_CLIENT_ID: '', TGS_ACCESS_TOKEN: '' });
  assert.equal(anonymous.code, 1);
  assert.match(anonymous.stderr, /needs credentials.*TGS_CLIENT_ID/);
  const wrong = await tgs(['graph', 'submit', file], { TGS_ACCESS_TOKEN: 'wrong' });
  assert.equal(wrong.code, 1);
  assert.match(wrong.stderr, /authentication failed as static\/tgs\/root/);
});

test('extend and cancel: a graph waiting on a task gains a task, then is canceled (wait exits 1)', async () => {
  const gate = path.join(dir, 'gate');
  const file = graphFile('long', { tasks: { wait: { task: shellTask(`while [ ! -f ${gate} ]; do sleep 0.1; done`) } } });
  const submitted = await tgs(['graph', 'submit', file, '--json']);
  assert.equal(submitted.code, 0, submitted.stderr);
  const id = (JSON.parse(submitted.stdout) as { taskGraphId: string }).taskGraphId;
  const extension = graphFile('extension', { tasks: { later: { requires: ['wait'], task: shellTask('true') } } });
  const extended = await tgs(['graph', 'extend', id, extension]);
  assert.equal(extended.code, 0, extended.stderr);
  assert.match(extended.stdout, /extended with 1 task\(s\); it is running/);
  assert.match(extended.stdout, /later {2}\S{22}/);

  const canceled = await tgs(['graph', 'cancel', id]);
  assert.equal(canceled.code, 0, canceled.stderr);
  assert.match(canceled.stdout, /is canceled/);
  const waited = await tgs(['graph', 'wait', id]);
  assert.equal(waited.code, 1);
  assert.match(waited.stdout, new RegExp(`task-graph ${id} was canceled`));
  writeFileSync(gate, '');
});

test('amend fixes a failing build inside its graph (the newcomer\'s friction): the dry run says what would rerun, the amend reruns build and test, the graph finishes', async () => {
  const graph = (script: string) => ({
    routing: 'cli',
    tasks: {
      build: { task: shellTask(script) },
      test: { requires: ['build'], task: shellTask('true') },
      lint: { task: shellTask('true') },
    },
  });
  const submitted = await tgs(['graph', 'submit', graphFile('amend-broken', graph('exit 1')), '--json']);
  assert.equal(submitted.code, 0, submitted.stderr);
  const id = (JSON.parse(submitted.stdout) as { taskGraphId: string }).taskGraphId;
  const blocked = await tgs(['graph', 'wait', id]);
  assert.equal(blocked.code, 1);
  assert.match(blocked.stdout, /is blocked/);

  const fixed = graphFile('amend-fixed', graph('echo fixed'));
  const dry = await tgs(['graph', 'amend', id, fixed, '--dry-run']);
  assert.equal(dry.code, 0, dry.stderr);
  assert.match(dry.stdout, /dry run of an amend .*nothing was changed/);
  assert.match(dry.stdout, /changed: build/);
  assert.match(dry.stdout, /dependent \(requires a changed label\): test/);
  assert.match(dry.stdout, /would rerun 2 task\(s\): build, test/);
  const stillBlocked = await tgs(['graph', 'status', id, '--json']);
  assert.match(stillBlocked.stdout, /"state": "blocked"/);

  const amended = await tgs(['graph', 'amend', id, fixed]);
  assert.equal(amended.code, 0, amended.stderr);
  assert.match(amended.stdout, /amended \(amend #1\)/);
  assert.match(amended.stdout, /reruns 2 task\(s\): build, test/);
  assert.match(amended.stdout, /build {2}\S{22}/);
  const waited = await tgs(['graph', 'wait', id]);
  assert.equal(waited.code, 0, waited.stdout + waited.stderr);
});

test('task log -f follows a running task to its end', async () => {
  const gate = path.join(dir, 'follow-gate');
  const file = graphFile('follow', { tasks: { talk: { task: shellTask(`echo one; while [ ! -f ${gate} ]; do sleep 0.1; done; echo two`) } } });
  const submitted = await tgs(['graph', 'submit', file, '--json']);
  const taskId = (JSON.parse(submitted.stdout) as { tasks: { taskId: string }[] }).tasks[0].taskId;
  const follow = tgs(['task', 'log', '-f', taskId]);
  setTimeout(() => writeFileSync(gate, ''), 3000);
  const run = await follow;
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /^one\ntwo$/m);
  assert.match(run.stdout, /resolved: completed/);
  assert.ok(existsSync(gate));
});

test('graph file defaults: created, deadline, metadata and $fromNow', () => {
  const now = Date.parse('2030-01-01T00:00:00.000Z');
  const tasks = withTaskDefaults(
    { a: { task: { provisionerId: 'p', workerType: 'w', payload: {}, expires: { $fromNow: '2 days 1 hour' }, metadata: { name: 'mine' } } } },
    { now, owner: 'me@host', source: 'http://x/ui' },
  );
  assert.deepEqual(tasks.a.task, {
    provisionerId: 'p',
    workerType: 'w',
    payload: {},
    expires: '2030-01-03T01:00:00.000Z',
    created: '2030-01-01T00:00:00.000Z',
    deadline: '2030-01-02T00:00:00.000Z',
    metadata: { name: 'mine', description: 'task a', owner: 'me@host', source: 'http://x/ui' },
  });
  assert.equal(fromNow('-15 min', now), '2029-12-31T23:45:00.000Z');
  assert.throws(() => fromNow('soon', now), /write a duration like/);
  assert.throws(() => fromNow('3 fortnights', now), /unknown unit "fortnights"/);
});

test('progress on a TTY: the block is redrawn in place (cursor up, clear), long lines cut to the width', async () => {
  const writes: string[] = [];
  const out = { isTTY: true, columns: 60, write: (s: string) => writes.push(s) } as unknown as NodeJS.WriteStream;
  const running = Array.from({ length: 12 }, (_, i) => ({ label: `job-${i}`, taskId: slugid.nice(), state: 'running' }));
  const fakeClient = { inspect: async () => running } as unknown as TgsClient;
  const progress = new Progress(fakeClient, 'G', out);
  const info = (state: GraphState, counts: GraphInfo['counts']) => ({ status: { state }, taskCount: 14, counts }) as GraphInfo;
  await progress.update(info('running', { running: 12, unscheduled: 2 }));
  await progress.update(info('running', { running: 12, unscheduled: 2 }));
  await progress.update(info('finished', { completed: 14 }));
  assert.equal(writes.length, 3);
  assert.match(writes[0], /^task-graph G · running · \d+\.\ds\n {2}14 tasks: 0 completed, 12 running, 2 unscheduled\n {2}running: job-0, job-1, .*…\n$/);
  assert.ok(!writes[0].includes(ESC));
  assert.ok(writes[1].startsWith(`${ESC}[3A${ESC}[J`), 'moves up over the 3 lines drawn before and clears them');
  assert.ok(writes[2].startsWith(`${ESC}[3A${ESC}[J`));
  assert.match(writes[2], /finished · \d+\.\ds\n {2}14 tasks: 14 completed\n$/);
  for (const line of writes.join('').split('\n')) assert.ok(line.replace(/\x1b\[\d*[AJ]/g, '').length <= 59, line);
});
