import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { eventually } from '../../support/stack.js';
import { startFastWorker, type ClaimedTask, type FastWorker } from '../../support/fastWorker.js';
import { fastTask } from '../../support/graphs.js';
import { startRelay } from '../../src/relay/relay.js';
import { explainQuery, workflowIdFor } from '../../src/workflows/contract.js';
import { explainTask as explainTaskFromRows, type TaskExplanation } from '../../src/queue/explainTask.js';
import { explainGraph as explainGraphFromRows, type GraphExplanation } from '../../src/scheduler/explainGraph.js';
import { requireGraph } from '../../src/scheduler/graphStore.js';
import { useStack } from '../helpers/stackFixture.js';

/*
 * "Why isn't it running?" on the real stack: each blocker kind where it arises, and the graph's root causes.
 * claimWork long-polls 1 s here, so a queue without a claimWork for 3 s has no workers (3 × the long-poll).
 */
// A resolution the workflow has not acted on for 500 ms is inconsistent here (TGS_INCONSISTENT_AFTER_MS, 10 s by
// default), so a lost one shows within a second.
const stack = useStack({ configOverrides: { claimWorkWaitMs: 1000, inconsistentAfterMs: 500 } });
const workers: FastWorker[] = [];
const releases: (() => void)[] = [];
/** relays a test started in place of the stack's */
const relays: Awaited<ReturnType<typeof startRelay>>[] = [];
stack.onStop(async () => {
  for (const r of releases) r();
  for (const w of workers) await w.stop();
  for (const r of relays) await r.stop();
});

const task = (name: string, workerType: string, outcomes: string[] = ['completed']) => ({ ...fastTask(name, outcomes), workerType });
async function submit(tasks: Record<string, { requires?: string[]; reruns?: number; task: unknown }>) {
  const taskGraphId = slugid.nice();
  const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, { tasks });
  return { taskGraphId, id: (label: string) => res.tasks.find((t) => t.label === label)!.taskId };
}
const explainTask = (taskId: string) => stack.root.request<TaskExplanation>('queue', 'GET', `/task/${taskId}/explain`);
const explainGraph = (taskGraphId: string) => stack.root.request<GraphExplanation>('scheduler', 'GET', `/task-graph/${taskGraphId}/explain`);
/** The `tgs` CLI as a user runs it, with root credentials from the environment. */
async function tgs(...args: string[]): Promise<string> {
  const env = { ...process.env, TGS_ROOT_URL: stack.api.rootUrl, TGS_CLIENT_ID: stack.api.root.clientId, TGS_ACCESS_TOKEN: stack.api.root.accessToken };
  return (await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', ...args], { env })).stdout;
}
const stateOf = async (taskId: string) => (await stack.root.request<{ status: { state: string } }>('queue', 'GET', `/task/${taskId}/status`)).status.state;

test('a queue nobody claims from is no-workers at once; its dependent waits on it; a busy worker is workers-busy with a position, never no-workers', async () => {
  const g = await submit({ a: { task: task('a', 'exp-slow') }, b: { requires: ['a'], task: task('b', 'exp-slow') } });
  await eventually(async () => (await stateOf(g.id('a'))) === 'pending', 'a pending');
  const a = await explainTask(g.id('a'));
  assert.equal(a.state, 'pending');
  assert.deepEqual(a.blockers.map((b) => b.kind), ['no-workers']);
  assert.equal(a.blockers[0].taskQueueId, 'tgs-test/exp-slow');
  assert.equal(a.blockers[0].lastClaimWork, null);
  assert.equal(a.blockers[0].action, 'start a worker for tgs-test/exp-slow');
  assert.match(a.summary, /no worker has ever claimed from tgs-test\/exp-slow/);
  const b = await explainTask(g.id('b'));
  assert.deepEqual(b.blockers.map((x) => x.kind), ['dependency']);
  assert.deepEqual(b.blockers[0].dependencies, [{ taskId: g.id('a'), label: 'a', state: 'pending' }]);
  const graph = await explainGraph(g.taskGraphId);
  assert.equal(graph.unresolved, 2);
  assert.deepEqual(graph.rootCauses.map((c) => [c.kind, c.taskQueueId, c.count]), [['no-workers', 'tgs-test/exp-slow', 2]]);

  // one worker slot, held by `a` until released (in `after` at the latest, or the worker never stops)
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  releases.push(() => release());
  workers.push(
    startFastWorker({
      rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'exp-slow', concurrency: 1,
      decide: async (t: ClaimedTask) => {
        if (t.taskId === g.id('a')) await held;
        return 'completed' as const;
      },
    }),
  );
  await eventually(async () => (await stateOf(g.id('a'))) === 'running', 'a running');
  const waiting = await explainTask(g.id('b'));
  assert.deepEqual(waiting.blockers[0].dependencies, [{ taskId: g.id('a'), label: 'a', state: 'running' }]);
  assert.match(waiting.summary, /waiting on 1 of 1 dependencies: a \(running\)/);
  // two more tasks for the busy slot, then longer than the no-workers window without a claimWork
  const more = await submit({ c: { task: task('c', 'exp-slow') }, d: { task: task('d', 'exp-slow') } });
  await eventually(async () => (await stateOf(more.id('d'))) === 'pending' && (await stateOf(more.id('c'))) === 'pending', 'c and d pending');
  await new Promise((r) => setTimeout(r, 3500));
  const answers = [await explainTask(more.id('c')), await explainTask(more.id('d'))];
  for (const x of answers) assert.deepEqual(x.blockers.map((bl) => bl.kind), ['workers-busy'], JSON.stringify(x));
  assert.ok(answers.some((x) => x.blockers[0].position!.ahead >= 1), JSON.stringify(answers.map((x) => x.blockers[0].position)));
  const busy = await explainGraph(more.taskGraphId);
  assert.deepEqual(busy.rootCauses.map((c) => [c.kind, c.taskQueueId, c.count]), [['workers-busy', 'tgs-test/exp-slow', 2]]);
  release();
  await stack.client.workflow.getHandle(workflowIdFor(g.taskGraphId)).result();
  await stack.client.workflow.getHandle(workflowIdFor(more.taskGraphId)).result();
  const done = await explainGraph(g.taskGraphId);
  assert.equal(done.state, 'finished');
  assert.deepEqual(done.rootCauses, []);
});

test('a task failed for good: its descendants explain dependency-failed, the graph has it as its one root cause for all of them, and a rerun clears it', async () => {
  workers.push(startFastWorker({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'exp-fail', concurrency: 4 }));
  const tasks: Record<string, { requires?: string[]; task: unknown }> = { build: { task: task('build', 'exp-fail', ['failed', 'completed']) } };
  for (let i = 0; i < 5; i++) tasks[`test-${i}`] = { requires: ['build'], task: task(`test-${i}`, 'exp-fail') };
  tasks.package = { requires: ['test-0', 'test-1'], task: task('package', 'exp-fail') };
  tasks.other = { task: task('other', 'exp-fail') };
  const g = await submit(tasks);
  await eventually(async () => (await stack.root.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${g.taskGraphId}/status`)).status.state === 'blocked', 'blocked');
  await eventually(async () => (await stateOf(g.id('other'))) === 'completed', 'other done');
  const x = await explainTask(g.id('test-3'));
  assert.deepEqual(x.blockers.map((bl) => bl.kind), ['dependency-failed']);
  assert.deepEqual(x.blockers[0].dependencies, [{ taskId: g.id('build'), label: 'build', state: 'failed' }]);
  assert.equal(x.blockers[0].action, 'rerun build');
  const pkg = await explainTask(g.id('package'));
  assert.deepEqual(pkg.blockers.map((bl) => bl.kind), ['dependency', 'graph-blocked']);
  const graph = await explainGraph(g.taskGraphId);
  assert.deepEqual(graph.rootCauses.map((c) => [c.kind, c.label, c.count, c.action]), [['dependency-failed', 'build', 6, 'rerun build']]);
  assert.equal(graph.unresolved, 6);
  assert.match(graph.summary, /6 task\(s\) wait on failed task build/);
  // as a person sees it: `tgs graph why`, `tgs task why`
  const graphWhy = await tgs('graph', 'why', g.taskGraphId);
  assert.match(graphWhy, /6 task\(s\) unresolved: 6 task\(s\) wait on failed task build/);
  assert.match(graphWhy, /\s6  dependency-failed build\n\s+→ rerun build/);
  const taskWhy = await tgs('task', 'why', g.id('test-3'));
  assert.match(taskWhy, /^[A-Za-z0-9_-]{22}: will not run: 1 of 1 dependencies failed for good \(build\); rerun build/);
  assert.match(taskWhy, /dependency-failed: build \(failed\)\n\s+→ rerun build/);
  // the same from Temporal's side: the workflow's explain query
  const model = await stack.client.workflow.getHandle(workflowIdFor(g.taskGraphId)).query(explainQuery, {});
  assert.deepEqual(model.causes.map((c) => [c.kind, c.label, c.count]), [['failed', 'build', 6]]);
  await stack.root.request('scheduler', 'POST', `/task-graph/${g.taskGraphId}/rerun/build`, {});
  await stack.client.workflow.getHandle(workflowIdFor(g.taskGraphId)).result();
  assert.deepEqual((await explainGraph(g.taskGraphId)).rootCauses, []);
  assert.deepEqual((await explainTask(g.id('package'))).blockers, []);
});

test('a lost resolution: the dependent explains inconsistent, and the call makes the workflow reconcile and schedule it within seconds', async () => {
  const g = await submit({ p: { task: task('p', 'exp-lost') }, q: { requires: ['p'], task: task('q', 'exp-lost') } });
  await eventually(async () => (await stateOf(g.id('p'))) === 'pending', 'p pending');
  // p completes while its task-completed message is lost (the relay stopped, the outbox row deleted)
  await stack.relay!.stop();
  const claim = await stack.root.request<{ tasks: { status: { taskId: string } }[] }>('queue', 'POST', '/claim-work/tgs-test/exp-lost', { workerGroup: 'g', workerId: 'w', tasks: 1 });
  assert.equal(claim.tasks[0].status.taskId, g.id('p'));
  const marker = (await stack.api.db.pool.query<{ id: string }>('SELECT coalesce(max(id), 0) AS id FROM outbox')).rows[0].id;
  await stack.root.request('queue', 'POST', `/task/${g.id('p')}/runs/0/completed`);
  await stack.api.api.deps.groupAnnouncer.flush();
  await stack.api.db.pool.query('DELETE FROM outbox WHERE id > $1', [marker]);
  // moments after p's resolution, before the window: an ordinary transition, not inconsistent
  const justNow = await explainTaskFromRows(stack.api.db.pool, g.id('q'), new Date(), 1000, 60_000);
  assert.deepEqual(justNow.blockers.map((b) => [b.kind, b.dependencies]), [['dependency', []]]);
  assert.match(justNow.summary, /^being scheduled: every requirement is met; wait: its last requirement resolved \d+ s ago/);
  const model = await stack.client.workflow.getHandle(workflowIdFor(g.taskGraphId)).query(explainQuery, { limit: 100 });
  const row = await requireGraph(stack.api.db.pool, g.taskGraphId);
  const graphJustNow = await explainGraphFromRows(stack.api.db.pool, row, model, { now: new Date(), claimWorkWaitMs: 1000, limit: 20, inconsistentAfterMs: 60_000 });
  assert.deepEqual(graphJustNow.rootCauses.map((c) => c.kind), ['dependency']);
  assert.equal(graphJustNow.reconciling, false);
  const graphLater = await explainGraphFromRows(stack.api.db.pool, row, model, { now: new Date(Date.now() + 60_000), claimWorkWaitMs: 1000, limit: 20, inconsistentAfterMs: 60_000 });
  assert.deepEqual(graphLater.rootCauses.map((c) => c.kind), ['inconsistent'], 'past the window, the same rows are a lost resolution');
  relays.push(await startRelay({ config: stack.config, log: () => undefined, temporal: async () => stack.client }));
  {
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(await stateOf(g.id('q')), 'unscheduled', 'nothing told the workflow');
    // security review 2026-11-28, info 15: twenty explanations at once signal the workflow once (a spy on the port)
    const owner = stack.api.api.deps.taskGroups;
    const reconcile = owner.reconcile.bind(owner);
    let signals = 0;
    owner.reconcile = (id: string) => {
      signals++;
      return reconcile(id);
    };
    const explained = await Promise.all(Array.from({ length: 20 }, () => explainTask(g.id('q'))));
    owner.reconcile = reconcile;
    assert.equal(signals, 1, 'one reconcile signal for twenty explanations');
    const q = explained[0];
    assert.deepEqual(q.blockers.map((b) => b.kind), ['inconsistent']);
    assert.match(q.summary, /every requirement is met but the task is still unscheduled/);
    const started = Date.now();
    await eventually(async () => (await stateOf(g.id('q'))) === 'pending', 'q scheduled by the reconciliation', 15_000);
    const took = Date.now() - started;
    assert.ok(took < 15_000, `${took} ms`);
  }
});

test('a healthy graph explained while it runs is never inconsistent: every transition is within the window', async () => {
  const tasks: Record<string, { requires?: string[]; task: unknown }> = {};
  for (let i = 0; i < 60; i++) tasks[`t${i}`] = { requires: i < 3 ? [] : [`t${i - 3}`], task: task(`t${i}`, 'exp-healthy') };
  const g = await submit(tasks);
  // the workflow answers its explain query once it has loaded the graph and dispatched the roots
  await eventually(async () => (await stateOf(g.id('t0'))) === 'pending', 't0 pending');
  const kinds = new Set<string>();
  let polls = 0;
  for (;;) {
    if (polls === 1) workers.push(startFastWorker({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'exp-healthy', concurrency: 4 }));
    const row = await requireGraph(stack.api.db.pool, g.taskGraphId);
    if (row.state === 'finished') break;
    const model = await stack.client.workflow.getHandle(workflowIdFor(g.taskGraphId)).query(explainQuery, { limit: 100 });
    // the default window, on the rows of this very moment
    const explained = await explainGraphFromRows(stack.api.db.pool, row, model, { now: new Date(), claimWorkWaitMs: 1000, limit: 20, inconsistentAfterMs: 10_000 });
    for (const c of explained.rootCauses) kinds.add(c.kind);
    polls++;
  }
  assert.ok(polls >= 2, `explained ${polls} times while it ran`);
  assert.ok(!kinds.has('inconsistent'), `causes seen: ${[...kinds].join(', ')}`);
});

