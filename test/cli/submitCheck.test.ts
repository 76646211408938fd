import { test } from 'node:test';
import assert from 'node:assert/strict';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { useStack } from '../helpers/stackFixture.js';
import { runTgs, useShellWorker } from '../helpers/cli.js';
import { closest } from '../../src/cli/didYouMean.js';
import { mergeDefaults } from '../../src/cli/graphFile.js';

// Mistakes caught when they are made: at submit (--check, warnings, "did you mean"), and explanations that end with
// the command to run.
const stack = useStack();
const shell = useShellWorker(stack, 'check');

const tgs = (args: string[]) =>
  runTgs(args, { TGS_ROOT_URL: stack.api.rootUrl, TGS_CLIENT_ID: stack.api.root.clientId, TGS_ACCESS_TOKEN: stack.api.root.accessToken });
const task = (command: string, workerType = 'check') => ({ provisionerId: 'tgs-test', workerType, payload: { command, maxRunTime: 60 } });

function graphFile(name: string, graph: unknown): string {
  const file = path.join(shell.dir, `${name}.json`);
  writeFileSync(file, JSON.stringify(graph));
  return file;
}

test('did you mean: one edit or a swap away, case ignored; nothing when nothing is close', () => {
  assert.equal(closest('biuld', ['build', 'test']), 'build');
  assert.equal(closest('require', ['requires', 'reruns', 'task', 'cache']), 'requires');
  assert.equal(closest('TEST', ['build', 'test']), 'test');
  assert.equal(closest('deploy', ['build', 'test']), undefined);
});

test('graph defaults merge under each task: objects key by key, the task\'s own values win', () => {
  const merged = mergeDefaults({ provisionerId: 'tgs-dev', workerType: 'shell', payload: { maxRunTime: 600, env: { A: '1' } }, routes: ['a'] }, {
    payload: { command: 'make', env: { B: '2' } },
    routes: ['b'],
  });
  assert.deepEqual(merged, { provisionerId: 'tgs-dev', workerType: 'shell', payload: { maxRunTime: 600, command: 'make', env: { A: '1', B: '2' } }, routes: ['b'] });
});

test('submit --check: typos with "did you mean", $subs outside requires, a pool without workers, a payload the shell worker refuses; nothing submitted', async () => {
  // a graph on the pool first, so its shell worker is known to the queue
  const warmUp = await tgs(['graph', 'submit', graphFile('warm', { tasks: { one: { task: task('true') } } }), '--wait']);
  assert.equal(warmUp.code, 0, warmUp.stdout + warmUp.stderr);
  const file = graphFile('mistakes', {
    tasks: {
      build: { task: task('echo build') },
      test: { require: ['build'], task: task('echo test') },
      lint: { requires: ['biuld'], task: task('echo lint') },
      package: { task: { ...task('echo package'), payload: { command: 'echo pkg', env: { BUILD: { $subs: 'taskId:build' } }, maxRunTime: 60 } } },
      bad: { task: { provisionerId: 'tgs-test', workerType: 'check', payload: { cmd: 'echo hi' } } },
      lost: { task: task('echo lost', 'chekc') },
    },
  });
  const run = await tgs(['graph', 'submit', '--check', file]);
  assert.equal(run.code, 1, run.stdout + run.stderr);
  assert.match(run.stderr, /tgs: error: test: unknown property "require" \(did you mean "requires"\?\)/);
  assert.match(run.stderr, /tgs: error: lint: requires unknown label "biuld" \(did you mean "build"\?\)/);
  assert.match(run.stderr, /tgs: warning: package: \$subs names "build", which it does not require: it may run before build exists or has its artifacts \(add "build" to requires\)/);
  assert.match(run.stderr, /tgs: warning: no worker has claimed from tgs-test\/chekc in the last day \(lost will wait for one\) \(did you mean "tgs-test\/check"\?\); pools with workers: .*tgs-test\/check/);
  assert.match(run.stderr, /tgs: error: bad \(on tgs-test\/check, a shell worker's pool\): The task payload is not valid for tgs shell-worker:/);
  assert.match(run.stderr, /maxRunTime/);
  assert.match(run.stdout, /3 error\(s\), 2 warning\(s\): fix the errors before submitting/);
  assert.doesNotMatch(run.stdout, /submitted/);

  const fine = await tgs(['graph', 'submit', '--check', graphFile('fine', { tasks: { a: { task: task('true') } } })]);
  assert.equal(fine.code, 0, fine.stdout + fine.stderr);
  assert.match(fine.stdout, /1 task\(s\) checked: no errors/);
});

test('submit warns of $subs outside requires and goes on; refuses a typo with the API\'s list and "did you mean" first', async () => {
  const warned = await tgs(['graph', 'submit', graphFile('subs', {
    tasks: { build: { task: task('echo build') }, use: { task: { ...task('echo use'), payload: { command: 'echo use', maxRunTime: 60, env: { B: { $subs: 'taskId:build' } } } } } },
  })]);
  assert.equal(warned.code, 0, warned.stderr);
  assert.match(warned.stderr, /tgs: warning: use: \$subs names "build", which it does not require/);
  assert.match(warned.stdout, /submitted \(2 tasks\)/);

  const typo = await tgs(['graph', 'submit', graphFile('typo', { tasks: { build: { task: task('true') }, lint: { requires: ['biuld'], task: task('true') } } })]);
  assert.equal(typo.code, 1);
  assert.match(typo.stderr, /tgs: error: lint: requires unknown label "biuld" \(did you mean "build"\?\)/);
  assert.match(typo.stderr, /lint: requires unknown label "biuld"\n|lint: requires unknown label "biuld"$/m);
});

test('task why on a failed task gives the exit code and the commands; graph why ends with the command to run', async () => {
  const run = await tgs(['graph', 'submit', graphFile('fails', { tasks: { breaks: { task: task('echo no; exit 4') } } }), '--wait']);
  assert.equal(run.code, 1, run.stdout + run.stderr);
  const id = /task-graph (\S+) submitted/.exec(run.stdout)?.[1] as string;
  const taskId = /blocking task: breaks \((\S+)\)/.exec(run.stdout)?.[1] as string;
  const why = await tgs(['task', 'why', taskId]);
  assert.equal(why.code, 0, why.stderr);
  assert.match(why.stdout, /run 0 failed: exit code 4\n {4}→ its log: tgs task log \S+\n {4}→ rerun it: tgs graph rerun \S+ breaks/);
  const graphWhy = await tgs(['graph', 'why', id]);
  assert.equal(graphWhy.code, 0, graphWhy.stderr);
  assert.match(graphWhy.stdout, new RegExp(`Run next: tgs graph rerun ${id} breaks\\n$`));
});
