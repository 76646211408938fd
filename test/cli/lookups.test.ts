import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import slugid from 'slugid';
import { useStack } from '../helpers/stackFixture.js';
import { runTgs, useShellWorker } from '../helpers/cli.js';

// The commands a new user reaches for first: graph list, task log by label, graph logs, ids in words.
const stack = useStack();
const shell = useShellWorker(stack, 'lookups');

const tgs = (args: string[], onStdout?: (soFar: string) => void) =>
  runTgs(args, { TGS_ROOT_URL: stack.api.rootUrl, TGS_CLIENT_ID: stack.api.root.clientId, TGS_ACCESS_TOKEN: stack.api.root.accessToken }, { onStdout });

const task = (command: string) => ({ provisionerId: 'tgs-test', workerType: 'lookups', payload: { command, maxRunTime: 60 } });

function graphFile(name: string, graph: unknown): string {
  const file = path.join(shell.dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(graph));
  return file;
}

test('graph list filters by state, name and age; task log takes a graph and a label; graph logs prefixes every line with its label', async () => {
  const okFile = graphFile('lookup-ok', {
    metadata: { name: 'lookup alpha' },
    tasks: { build: { task: task('echo compiling; echo linked') }, test: { requires: ['build'], task: task('echo tests pass') } },
  });
  const ok = await tgs(['graph', 'submit', okFile, '--wait']);
  assert.equal(ok.code, 0, ok.stdout + ok.stderr);
  const okId = /task-graph (\S+) submitted/.exec(ok.stdout)?.[1] as string;
  const badFile = graphFile('lookup-bad', { metadata: { name: 'lookup beta' }, tasks: { breaks: { task: task('echo about to fail; exit 3') } } });
  const bad = await tgs(['graph', 'submit', badFile, '--wait']);
  assert.equal(bad.code, 1, bad.stdout + bad.stderr);
  const badId = /task-graph (\S+) submitted/.exec(bad.stdout)?.[1] as string;

  const all = await tgs(['graph', 'list']);
  assert.equal(all.code, 0, all.stderr);
  assert.match(all.stdout, /^TASK GRAPH ID\s+STATE\s+TASKS\s+NAME\s+CREATED$/m);
  // newest first
  assert.ok(all.stdout.indexOf(badId) < all.stdout.indexOf(okId), all.stdout);
  assert.match(all.stdout, new RegExp(`^${okId}\\s+finished\\s+2/2\\s+lookup alpha\\s+\\S+ \\(\\d+\\.\\ds ago\\)$`, 'm'));
  const blocked = await tgs(['graph', 'list', '--state', 'blocked']);
  assert.match(blocked.stdout, new RegExp(`^${badId}\\s+blocked\\s+0/1\\s+lookup beta`, 'm'));
  assert.doesNotMatch(blocked.stdout, new RegExp(okId));
  const named = await tgs(['graph', 'list', '--name', 'ALPHA', '--json']);
  assert.deepEqual((JSON.parse(named.stdout) as { status: { taskGraphId: string } }[]).map((g) => g.status.taskGraphId), [okId]);
  const old = await tgs(['graph', 'list', '--since', '2030-01-01T00:00:00Z']);
  assert.match(old.stdout, /no task-graphs match/);
  const wrongState = await tgs(['graph', 'list', '--state', 'done']);
  assert.equal(wrongState.code, 1);
  assert.match(wrongState.stderr, /--state "done": give one of running, blocked, finished, canceled, terminated/);

  const byLabel = await tgs(['task', 'log', okId, 'build']);
  assert.equal(byLabel.code, 0, byLabel.stderr);
  assert.match(byLabel.stdout, /^compiling\nlinked$/m);
  const typo = await tgs(['task', 'log', okId, 'biuld']);
  assert.equal(typo.code, 1);
  assert.match(typo.stderr, new RegExp(`task-graph ${okId} has no task "biuld" \\(did you mean "build"\\?\\): tgs graph inspect ${okId} lists its labels`));

  const logs = await tgs(['graph', 'logs', okId]);
  assert.equal(logs.code, 0, logs.stderr);
  assert.match(logs.stdout, /^build \| compiling\nbuild \| linked$/m);
  assert.match(logs.stdout, /^test {2}\| tests pass$/m);
  assert.match(logs.stdout, /^build \| \[tgs-shell-worker \S+\] exit code 0/m);
});

test('graph logs -f follows every task as it runs, until the graph stops running', async () => {
  const gate = path.join(shell.dir, 'logs-gate');
  const file = graphFile('follow', {
    tasks: {
      first: { task: task(`echo first starts; while [ ! -f ${gate} ]; do sleep 0.1; done; echo first ends`) },
      second: { requires: ['first'], task: task('echo second runs') },
    },
  });
  const submitted = await tgs(['graph', 'submit', file]);
  const id = /task-graph (\S+) submitted/.exec(submitted.stdout)?.[1] as string;
  const run = await tgs(['graph', 'logs', '-f', id], (soFar) => soFar.includes('first  | first starts') && writeFileSync(gate, ''));
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /^first {2}\| first starts$/m);
  assert.match(run.stdout, /^first {2}\| first ends$/m);
  assert.match(run.stdout, /^second \| second runs$/m);
  assert.match(run.stderr, new RegExp(`task-graph ${id} is finished`));
});

test('ids in words: not a slugid, a task-graph id given as a taskId, a taskId given as a task-graph id', async () => {
  const nope = await tgs(['graph', 'status', 'nope']);
  assert.equal(nope.code, 1);
  assert.match(nope.stderr, /`nope` is not a taskGraphId: a taskGraphId is a slugid, 22 characters of A-Z, a-z, 0-9, _ and - \(this one has 4 character\(s\)\)/);
  const file = graphFile('ids', { tasks: { only: { task: task('echo hi') } } });
  const submitted = await tgs(['graph', 'submit', file, '--wait']);
  const id = /task-graph (\S+) submitted/.exec(submitted.stdout)?.[1] as string;
  const asTask = await tgs(['task', 'log', id]);
  assert.equal(asTask.code, 1);
  assert.match(asTask.stderr, new RegExp(`${id} is a task-graph id, not a taskId: tgs graph inspect ${id} lists its tasks`));
  const taskId = (await stack.root.request<{ tasks: { taskId: string }[] }>('scheduler', 'GET', `/task-graph/${id}/inspect`)).tasks[0].taskId;
  const asGraph = await tgs(['graph', 'why', taskId]);
  assert.equal(asGraph.code, 1);
  assert.match(asGraph.stderr, new RegExp(`${taskId} is a taskId, not a task-graph id: its task group is ${id}`));
  const unknown = await tgs(['task', 'status', slugid.nice()]);
  assert.match(unknown.stderr, /ResourceNotFound \(404\)/);
  // the API says it in words too
  const api = await fetch(`${stack.api.rootUrl}/api/scheduler/v1/task-graph/nope/status`);
  assert.match(((await api.json()) as { message: string }).message, /Invalid taskGraphId "nope": not a taskGraphId \(a slugid: 22 characters/);
});
