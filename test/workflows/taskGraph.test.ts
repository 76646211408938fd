import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { WorkflowFailedError, WorkflowUpdateFailedError } from '@temporalio/client';
import { CancelledFailure } from '@temporalio/common';
import { FakeGraph, fakeActivities } from '../helpers/fakeActivities.js';
import { startWorkflowEnv, type WorkflowEnv } from '../../support/workflowEnv.js';
import { eventually } from '../../support/stack.js';
import type { NodeSpec } from '../helpers/graphPages.js';
import {
  amendGraphUpdate,
  amendUpdate,
  cancelSignal,
  extendedSignal,
  rerunSignal,
  rerunUpdate,
  resolutionsSignal,
  statusQuery,
  WORKFLOW_TYPE,
  workflowIdFor,
  type TaskGraphInput,
  type TaskGraphWorkflow,
  type TuningOptions,
} from '../../src/workflows/contract.js';
import { Worker } from '@temporalio/worker';
import type { temporal } from '@temporalio/proto';

type HistoryEvent = temporal.api.history.v1.IHistoryEvent;
import { execFileSync } from 'node:child_process';
import { findTemporalCli } from '../../src/temporal/devServer.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import { workflowBundle } from '../../support/workflowEnv.js';

const graphs = new Map<string, FakeGraph>();
let env: WorkflowEnv;

before(async () => {
  env = await startWorkflowEnv(fakeActivities(graphs));
});

const handles: { name: string; workflowId: string }[] = [];

/**
 * Every finished scenario's history replays against the current workflow code (determinism). With
 * TGS_RECORD_HISTORIES=1 they are also saved as fixtures, which test/workflows/replay.test.ts replays
 * against future versions of the code.
 */
after(async () => {
  for (const { name, workflowId } of handles) {
    const history = await env.client.workflow.getHandle(workflowId).fetchHistory();
    await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, history, workflowId);
    if (process.env.TGS_RECORD_HISTORIES) {
      mkdirSync('test/fixtures/histories', { recursive: true });
      // The CLI's JSON is the format `temporal workflow show` users share; historyFromJSON reads it.
      const json = execFileSync(findTemporalCli() as string, [
        'workflow', 'show', '--address', env.server.address, '--workflow-id', workflowId, '--output', 'json',
      ]);
      // The file name carries the graph id: replay needs the workflow id the history ran under.
      writeFileSync(`test/fixtures/histories/${name}--${workflowId.split('/')[1]}.json`, json);
    }
  }
  await env.stop();
});

async function start(specs: NodeSpec[], tuning: TuningOptions = {}) {
  const taskGraphId = slugid.nice();
  const graph = new FakeGraph(taskGraphId, specs);
  graphs.set(taskGraphId, graph);
  const handle = await env.client.workflow.start<TaskGraphWorkflow>(WORKFLOW_TYPE, {
    taskQueue: env.taskQueue,
    workflowId: workflowIdFor(taskGraphId),
    args: [{ taskGraphId, tuning } satisfies TaskGraphInput],
  });
  handles.push({ name: `scenario-${handles.length + 1}`, workflowId: handle.workflowId });
  const resolve = (label: string, runId: number, state: 'completed' | 'failed' | 'exception') =>
    handle.signal(resolutionsSignal, [{ taskId: graph.id(label), runId, state }]);
  const dispatchedCount = (entry: string) => graph.dispatchedLabels().filter((d) => d === entry).length;
  const waitDispatched = (entry: string, times = 1) => graph.until(() => dispatchedCount(entry) >= times, `${entry} ×${times}`);
  const status = () => handle.query(statusQuery);
  return { taskGraphId, graph, handle, resolve, waitDispatched, status };
}

test('a diamond graph runs in order, publishes running then finished, and the workflow completes', async () => {
  const g = await start([
    { label: 'build' },
    { label: 'test-a', requires: ['build'] },
    { label: 'test-b', requires: ['build'] },
    { label: 'package', requires: ['test-a', 'test-b'] },
  ]);
  await g.waitDispatched('schedule:build');
  assert.deepEqual(g.graph.dispatchedLabels(), ['schedule:build']);
  await g.resolve('build', 0, 'completed');
  await g.waitDispatched('schedule:test-a');
  await g.waitDispatched('schedule:test-b');
  await g.resolve('test-a', 0, 'completed');
  await g.resolve('test-b', 0, 'completed');
  await g.waitDispatched('schedule:package');
  await g.resolve('package', 0, 'completed');
  const result = await g.handle.result();
  assert.deepEqual(result, { taskGraphId: g.taskGraphId, state: 'finished' });
  assert.deepEqual(g.graph.published.map((p) => `${p.kind}#${p.seq}:${p.state}`), ['task-graph-running#0:running', 'task-graph-finished#0:finished']);
  assert.equal(g.graph.dispatchedLabels().length, 4, 'each task dispatched once');
});

test('a task that fails twice passes with reruns=2; the status query counts states', async () => {
  const g = await start([{ label: 'flaky', reruns: 2 }, { label: 'after', requires: ['flaky'] }]);
  await g.waitDispatched('schedule:flaky');
  await g.resolve('flaky', 0, 'failed');
  await g.waitDispatched('rerun:flaky');
  await g.resolve('flaky', 1, 'failed');
  await g.waitDispatched('rerun:flaky', 2);
  const rerunsLeft = g.graph.dispatched.filter((d) => d.kind === 'rerun').map((d) => d.rerunsLeft);
  assert.deepEqual(rerunsLeft, [1, 0]);
  const mid = await g.status();
  assert.equal(mid.state, 'running');
  assert.equal(mid.counts.scheduled, 1);
  assert.equal(mid.counts.waiting, 1);
  await g.resolve('flaky', 2, 'completed');
  await g.waitDispatched('schedule:after');
  await g.resolve('after', 0, 'completed');
  assert.equal((await g.handle.result()).state, 'finished');
});

test('a task that always fails blocks the graph; a manual rerun (Update) after the fix finishes it', async () => {
  const g = await start([{ label: 'broken', reruns: 1 }, { label: 'independent' }, { label: 'after', requires: ['broken'] }]);
  await g.waitDispatched('schedule:broken');
  await g.resolve('broken', 0, 'failed');
  await g.waitDispatched('rerun:broken');
  await g.resolve('broken', 1, 'failed');
  await g.graph.until(() => g.graph.published.some((p) => p.kind === 'task-graph-blocked'), 'blocked message');
  const blocked = g.graph.published.find((p) => p.kind === 'task-graph-blocked');
  assert.deepEqual(blocked?.blockedBy, [g.graph.id('broken')]);
  assert.equal((await g.status()).state, 'blocked');
  // independent branches keep running while blocked
  await g.resolve('independent', 0, 'completed');

  await assert.rejects(
    g.handle.executeUpdate(rerunUpdate, { args: [{ label: 'after' }] }),
    (err: unknown) => err instanceof WorkflowUpdateFailedError && /only a resolved task/.test(String(((err as Error).cause as Error | undefined)?.message)),
  );
  await g.handle.signal(rerunSignal, { label: 'nope' });
  let refused: string[] = [];
  for (let i = 0; i < 50 && refused.length === 0; i++) {
    refused = (await g.status()).refused;
    if (refused.length === 0) await new Promise((r) => setTimeout(r, 100));
  }
  assert.match(refused[refused.length - 1] ?? '', /not a task of this task-graph/);

  const accepted = await g.handle.executeUpdate(rerunUpdate, { args: [{ label: 'broken' }] });
  assert.equal(accepted.taskId, g.graph.id('broken'));
  await g.waitDispatched('rerun:broken', 2);
  const manual = g.graph.dispatched.filter((d) => d.kind === 'rerun').at(-1);
  assert.equal(manual?.rerunsLeft, undefined, 'a manual rerun does not consume reruns');
  await g.graph.until(() => g.graph.published.filter((p) => p.kind === 'task-graph-running').length === 2, 'running again');
  await g.resolve('broken', 2, 'completed');
  await g.waitDispatched('schedule:after');
  await g.resolve('after', 0, 'completed');
  assert.equal((await g.handle.result()).state, 'finished');
});

test('duplicate and out-of-order resolutions do not double-schedule', async () => {
  const g = await start([{ label: 'a', reruns: 1 }, { label: 'b', requires: ['a'] }]);
  await g.waitDispatched('schedule:a');
  await g.resolve('a', 0, 'failed');
  await g.resolve('a', 0, 'failed');
  await g.waitDispatched('rerun:a');
  await g.resolve('a', 1, 'completed');
  await g.resolve('a', 0, 'failed');
  await g.resolve('a', 1, 'completed');
  await g.waitDispatched('schedule:b');
  await g.resolve('b', 0, 'completed');
  assert.equal((await g.handle.result()).state, 'finished');
  assert.deepEqual(g.graph.dispatchedLabels(), ['schedule:a', 'rerun:a', 'schedule:b']);
});

test('extend while running: new tasks requiring existing ones run, and an extended message is published', async () => {
  const g = await start([{ label: 'a' }, { label: 'b', requires: ['a'] }]);
  await g.waitDispatched('schedule:a');
  g.graph.add([{ label: 'c', requires: ['a'] }, { label: 'd', requires: ['c', 'b'] }]);
  await g.handle.signal(extendedSignal, { nodeCount: g.graph.nodeCount });
  await g.graph.until(() => g.graph.published.some((p) => p.kind === 'task-graph-extended'), 'extended message');
  await g.resolve('a', 0, 'completed');
  await g.waitDispatched('schedule:b');
  await g.waitDispatched('schedule:c');
  await g.resolve('b', 0, 'completed');
  await g.resolve('c', 0, 'completed');
  await g.waitDispatched('schedule:d');
  await g.resolve('d', 0, 'completed');
  assert.equal((await g.handle.result()).state, 'finished');
});

test('a manual rerun with resetDependents reruns the resolved dependents after the task completes', async () => {
  const g = await start([{ label: 'a' }, { label: 'b', requires: ['a'] }, { label: 'c', requires: ['b'] }, { label: 'x' }]);
  await g.waitDispatched('schedule:a');
  await g.resolve('a', 0, 'completed');
  await g.waitDispatched('schedule:b');
  await g.resolve('b', 0, 'completed');
  await g.waitDispatched('schedule:c');
  await g.resolve('c', 0, 'exception');
  await g.graph.until(() => g.graph.published.some((p) => p.kind === 'task-graph-blocked'), 'blocked');
  const result = await g.handle.executeUpdate(rerunUpdate, { args: [{ label: 'a', resetDependents: true }] });
  assert.deepEqual(result.resetDependents.sort(), [g.graph.id('b'), g.graph.id('c')].sort());
  await g.waitDispatched('rerun:a');
  await g.resolve('a', 1, 'completed');
  await g.waitDispatched('rerun:b');
  await g.resolve('b', 1, 'completed');
  await g.waitDispatched('rerun:c');
  await g.resolve('c', 1, 'completed');
  await g.resolve('x', 0, 'completed');
  assert.equal((await g.handle.result()).state, 'finished');
});

test('cancel cancels every unresolved task and ends the workflow as canceled', async () => {
  const g = await start([{ label: 'a' }, { label: 'b', requires: ['a'] }, { label: 'c' }]);
  await g.waitDispatched('schedule:a');
  await g.resolve('c', 0, 'completed');
  await g.handle.signal(cancelSignal, {});
  assert.equal((await g.handle.result()).state, 'canceled');
  assert.deepEqual(new Set(g.graph.canceled), new Set([g.graph.id('a'), g.graph.id('b')]));
  assert.equal(g.graph.published.at(-1)?.kind, 'task-graph-canceled');
});

test('a lost resolution is recovered by reconciling with the queue', async () => {
  const g = await start([{ label: 'a' }, { label: 'b', requires: ['a'] }], { reconcileAfterMs: 500 });
  await g.waitDispatched('schedule:a');
  // the queue knows a completed, but no message ever reaches the workflow
  g.graph.queueResolutions.set(g.graph.id('a'), { taskId: g.graph.id('a'), runId: 0, state: 'completed' });
  await g.waitDispatched('schedule:b');
  g.graph.queueResolutions.set(g.graph.id('b'), { taskId: g.graph.id('b'), runId: 0, state: 'completed' });
  assert.equal((await g.handle.result()).state, 'finished');
});

/** The history's timers in ms, in the order they were started, and its length. */
async function historyTimers(handle: { fetchHistory(): Promise<{ events?: HistoryEvent[] | null }> }) {
  const { events } = await handle.fetchHistory();
  const timers = (events ?? []).flatMap((e) => {
    const d = e.timerStartedEventAttributes?.startToFireTimeout;
    return d ? [Number(d.seconds ?? 0) * 1000 + Math.round((d.nanos ?? 0) / 1e6)] : [];
  });
  return { timers, length: (events ?? []).length };
}

test('a graph blocked with nothing live in the queue sets no timer and reconciles never while it waits', async () => {
  const g = await start([{ label: 'a' }, { label: 'b', requires: ['a'] }], { reconcileAfterMs: 1000 });
  await g.waitDispatched('schedule:a');
  await g.resolve('a', 0, 'failed');
  await eventually(async () => (await g.status()).state === 'blocked', 'blocked');
  // the one timer set while `a` was live fires once (news came: no reconcile), then none is set
  await eventually(async () => (await historyTimers(g.handle)).timers.length === 1, 'the live-time timer');
  await new Promise((r) => setTimeout(r, 1500));
  const waited = await historyTimers(g.handle);
  await new Promise((r) => setTimeout(r, 3000));
  const later = await historyTimers(g.handle);
  assert.deepEqual(later, { ...waited }, 'no history event in 3 s of being blocked');
  assert.deepEqual(later.timers, [1000]);
  assert.equal(g.graph.reconcileCalls, 0);
  await g.handle.signal(cancelSignal, {});
  assert.equal((await g.handle.result()).state, 'canceled');
});

test('with a task live, reconciles back off while nothing changes, and news starts them again from reconcileAfterMs', async () => {
  const g = await start([{ label: 'a' }, { label: 'b' }], { reconcileAfterMs: 1000, reconcileMaxMs: 4000 });
  await g.waitDispatched('schedule:a');
  await g.waitDispatched('schedule:b');
  await g.graph.until(() => g.graph.reconcileCalls >= 4, 'four reconciles', 30_000);
  await g.resolve('a', 0, 'completed');
  await g.graph.until(() => g.graph.reconcileCalls >= 5, 'a reconcile after the news', 30_000);
  await g.resolve('b', 0, 'completed');
  assert.equal((await g.handle.result()).state, 'finished');
  const { timers } = await historyTimers(g.handle);
  // doubling to the cap, the cap again, then the news (a's resolution) while waiting: back to reconcileAfterMs
  assert.deepEqual(timers.slice(0, 6), [1000, 2000, 4000, 4000, 4000, 1000]);
  assert.equal(g.graph.reconcileCalls, 5);
});

test('continue-as-new carries the state: a 60-task chain finishes across several runs', async () => {
  const specs: NodeSpec[] = Array.from({ length: 60 }, (_, i) => ({ label: `t${i}`, requires: i ? [`t${i - 1}`] : [], reruns: 1 }));
  const g = await start(specs, { maxHistoryEvents: 60 });
  const firstRunId = (await g.handle.describe()).runId;
  for (let i = 0; i < 60; i++) {
    await g.waitDispatched(`schedule:t${i}`);
    if (i === 30) {
      await g.resolve(`t${i}`, 0, 'failed');
      await g.waitDispatched(`rerun:t${i}`);
      await g.resolve(`t${i}`, 1, 'completed');
    } else {
      await g.resolve(`t${i}`, 0, 'completed');
    }
  }
  assert.equal((await g.handle.result()).state, 'finished');
  const last = await env.client.workflow.getHandle(workflowIdFor(g.taskGraphId)).describe();
  assert.notEqual(last.runId, firstRunId, 'the workflow continued as new');
  assert.equal(g.graph.dispatched.length, 61, 'no task was dispatched twice across runs');
  assert.deepEqual(g.graph.published.map((p) => p.kind), ['task-graph-running', 'task-graph-finished']);
});

test('a run due to continue as new waits for its tasks live in the queue to resolve, and no longer than continueQuietWaitMs', async () => {
  // t0..t4 are dispatched at once and stay live; `after` waits for t0. Signals the graph ignores (a task it does not
  // have) fill the history past maxHistoryEvents without resolving anything.
  const specs: NodeSpec[] = [...Array.from({ length: 5 }, (_, i) => ({ label: `t${i}` })), { label: 'after', requires: ['t0'] }];
  const runIdOf = async (g: Awaited<ReturnType<typeof start>>) => (await env.client.workflow.getHandle(workflowIdFor(g.taskGraphId)).describe()).runId;
  const historyLength = async (g: Awaited<ReturnType<typeof start>>) => Number((await g.handle.describe()).historyLength);
  const fillHistory = async (g: Awaited<ReturnType<typeof start>>, events: number) => {
    while ((await historyLength(g)) <= events) {
      await g.handle.signal(resolutionsSignal, [{ taskId: 'not-in-this-graph', runId: 0, state: 'completed' }]);
      await new Promise((r) => setTimeout(r, 20));
    }
  };

  const waits = await start(specs, { maxHistoryEvents: 40, continueQuietWaitMs: 600_000 });
  const firstRunId = await runIdOf(waits);
  for (let i = 0; i < 5; i++) await waits.waitDispatched(`schedule:t${i}`);
  await fillHistory(waits, 50);
  await new Promise((r) => setTimeout(r, 1000));
  assert.equal(await runIdOf(waits), firstRunId, 'no continue-as-new while tasks are live');
  for (let i = 0; i < 5; i++) await waits.resolve(`t${i}`, 0, 'completed');
  await eventually(async () => (await runIdOf(waits)) !== firstRunId, 'continued as new once nothing was live');
  await waits.waitDispatched('schedule:after');
  await waits.resolve('after', 0, 'completed');
  assert.equal((await waits.handle.result()).state, 'finished');
  assert.equal(waits.graph.dispatched.length, 6, 'no task dispatched twice across the runs');

  const bounded = await start(specs, { maxHistoryEvents: 40, continueQuietWaitMs: 1000 });
  const boundedFirst = await runIdOf(bounded);
  for (let i = 0; i < 5; i++) await bounded.waitDispatched(`schedule:t${i}`);
  await fillHistory(bounded, 50);
  await eventually(async () => (await runIdOf(bounded)) !== boundedFirst, 'continued as new after the bounded wait, with tasks still live');
  await bounded.handle.signal(cancelSignal, {});
  assert.equal((await bounded.handle.result()).state, 'canceled');
});

test('a graph already blocked when its workflow starts announces running, then blocked, each with its own message', async () => {
  // A workflow started late (the missing-workflow sweep) finds a task the queue shows failed for good.
  const g = await start([
    { label: 'broken', queueState: 'f', latestRun: 0 },
    { label: 'after', requires: ['broken'] },
  ]);
  await g.graph.until(() => g.graph.published.some((p) => p.kind === 'task-graph-blocked'), 'blocked message');
  assert.deepEqual(g.graph.published.map((p) => `${p.kind}:${p.state}`), ['task-graph-running:running', 'task-graph-blocked:blocked']);
  assert.equal((await g.status()).state, 'blocked');
  await g.handle.signal(cancelSignal, {});
  await g.handle.result();
});

test('a graph loaded a page at a time, its nodes requiring nodes of later pages, runs in order and finishes', async () => {
  const g = await start(
    [
      { label: 'deploy', requires: ['package'] },
      { label: 'lint' },
      { label: 'build' },
      { label: 'test', requires: ['build'] },
      { label: 'package', requires: ['test', 'lint'] },
      { label: 'docs', requires: ['build'] },
      { label: 'notify', requires: ['deploy', 'docs'] },
    ],
    { nodePage: 2 },
  );
  await g.waitDispatched('schedule:lint');
  await g.waitDispatched('schedule:build');
  await g.resolve('build', 0, 'completed');
  await g.waitDispatched('schedule:test');
  await g.waitDispatched('schedule:docs');
  await g.resolve('lint', 0, 'completed');
  await g.resolve('test', 0, 'completed');
  await g.waitDispatched('schedule:package');
  await g.resolve('docs', 0, 'completed');
  await g.resolve('package', 0, 'completed');
  await g.waitDispatched('schedule:deploy');
  await g.resolve('deploy', 0, 'completed');
  await g.waitDispatched('schedule:notify');
  await g.resolve('notify', 0, 'completed');
  assert.deepEqual(await g.handle.result(), { taskGraphId: g.taskGraphId, state: 'finished' });
  assert.equal(g.graph.dispatchedLabels().length, 7, 'each task dispatched once');
  const { events } = await g.handle.fetchHistory();
  const pages = (events ?? []).filter((e) => e.activityTaskScheduledEventAttributes?.activityType?.name === 'loadNodes');
  assert.equal(pages.length, 4, 'seven nodes in pages of two');
  // the next page is asked for before the one before it is in (PAGES_TOGETHER_PATCH)
  const answered = (e: (typeof pages)[number]) =>
    (events ?? []).find((c) => c.activityTaskCompletedEventAttributes && String(c.activityTaskCompletedEventAttributes.scheduledEventId) === String(e.eventId));
  assert.ok(Number(pages[1].eventId) < Number(answered(pages[0])?.eventId), 'the second page was asked for before the first was answered');
});

test('an amend update replaces the failing task and its waiting dependent: the blocked graph runs on and finishes; a malformed one is refused', async () => {
  const g = await start([{ label: 'broken' }, { label: 'independent' }, { label: 'after', requires: ['broken'] }]);
  await g.waitDispatched('schedule:broken');
  await g.waitDispatched('schedule:independent');
  await g.resolve('independent', 0, 'completed');
  await g.resolve('broken', 0, 'failed');
  await g.graph.until(() => g.graph.published.some((p) => p.state === 'blocked'), 'blocked');
  await assert.rejects(
    g.handle.executeUpdate(amendUpdate, { args: [{ nodeCount: 3, superseded: [99] }] }),
    (err: unknown) => err instanceof WorkflowUpdateFailedError && /superseded/.test(String(err.cause?.message)),
  );
  // the amend endpoint stored the replacements (src/scheduler/amendTaskGraph.ts), then tells the workflow
  g.graph.add([{ label: 'broken-2' }, { label: 'after-2', requires: ['broken-2'] }]);
  const superseded = [g.graph.indexOf('broken'), g.graph.indexOf('after')];
  const accepted = await g.handle.executeUpdate(amendUpdate, { args: [{ nodeCount: g.graph.nodeCount, superseded }] });
  assert.deepEqual(accepted, { superseded: 2, nodeCount: 5 });
  // repeated (the endpoint retried): nothing more
  assert.deepEqual(await g.handle.executeUpdate(amendUpdate, { args: [{ nodeCount: g.graph.nodeCount, superseded }] }), { superseded: 0, nodeCount: 5 });
  await g.waitDispatched('schedule:broken-2');
  await g.resolve('broken-2', 0, 'completed');
  await g.waitDispatched('schedule:after-2');
  await g.resolve('after-2', 0, 'completed');
  assert.equal((await g.handle.result()).state, 'finished');
  assert.ok(!g.graph.dispatchedLabels().includes('schedule:after'), 'the replaced dependent never ran');
  assert.deepEqual(g.graph.published.map((p) => p.state), ['running', 'blocked', 'running', 'finished']);
});

test('an amendGraph update (a Temporal-native amend) stores the file through its activity and runs the replacements; refusals are the update\'s', async () => {
  const g = await start([{ label: 'broken' }, { label: 'after', requires: ['broken'] }]);
  await g.waitDispatched('schedule:broken');
  await g.resolve('broken', 0, 'failed');
  await g.graph.until(() => g.graph.published.some((p) => p.state === 'blocked'), 'blocked');
  const file = { tasks: { broken: { task: { payload: { fixed: true } } }, after: { requires: ['broken'], task: {} } } };
  // the shape is checked before anything runs; the activity's refusal comes back as the update's own failure
  await assert.rejects(
    g.handle.executeUpdate(amendGraphUpdate, { args: [{ tasks: [] } as never] }),
    (err: unknown) => err instanceof WorkflowUpdateFailedError && /edited graph file/.test(String(err.cause?.message)),
  );
  await assert.rejects(
    g.handle.executeUpdate(amendGraphUpdate, { args: [file] }),
    (err: unknown) => err instanceof WorkflowUpdateFailedError && err.cause?.message === 'fake: this amend is refused',
  );
  const asked: unknown[] = [];
  g.graph.onAmend = (request) => {
    asked.push(request);
    if (request.dryRun) return { dryRun: true, state: 'blocked', classification: { changed: ['broken'], metadata: [], added: [], dependent: ['after'], removed: [], unchanged: 0 }, tasks: [], mayBeKept: [], superseded: [], nodeCount: 2 };
    g.graph.add([{ label: 'broken-2' }, { label: 'after-2', requires: ['broken-2'] }]);
    return {
      dryRun: false,
      amend: 1,
      state: 'blocked',
      classification: { changed: ['broken'], metadata: [], added: [], dependent: ['after'], removed: [], unchanged: 0 },
      tasks: [{ label: 'broken', taskId: g.graph.id('broken-2') }, { label: 'after', taskId: g.graph.id('after-2') }],
      mayBeKept: [],
      superseded: [g.graph.indexOf('broken'), g.graph.indexOf('after')],
      nodeCount: g.graph.nodeCount,
    };
  };
  const dry = await g.handle.executeUpdate(amendGraphUpdate, { args: [{ ...file, dryRun: true }] });
  assert.equal(dry.dryRun, true);
  assert.equal(dry.superseded, 0);
  const applied = await g.handle.executeUpdate(amendGraphUpdate, { args: [file] });
  assert.deepEqual(asked, [{ ...file, dryRun: true }, file]);
  assert.equal(applied.superseded, 2);
  assert.equal(applied.amend, 1);
  await g.waitDispatched('schedule:broken-2');
  await g.resolve('broken-2', 0, 'completed');
  await g.waitDispatched('schedule:after-2');
  await g.resolve('after-2', 0, 'completed');
  assert.equal((await g.handle.result()).state, 'finished');
  assert.ok(!g.graph.dispatchedLabels().includes('schedule:after'));
});

test('a Temporal cancellation of the workflow ends the graph as the cancel signal does, then the workflow as Canceled', async () => {
  const g = await start([{ label: 'a' }, { label: 'b', requires: ['a'] }, { label: 'c' }]);
  await g.waitDispatched('schedule:a');
  await g.waitDispatched('schedule:c');
  await g.resolve('c', 0, 'completed');
  await g.graph.until(() => g.graph.dispatchedLabels().length === 2, 'a and c dispatched');
  await g.handle.cancel();
  await assert.rejects(g.handle.result(), (err: unknown) => err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure);
  assert.equal((await g.handle.describe()).status.name, 'CANCELLED');
  assert.deepEqual(new Set(g.graph.canceled), new Set([g.graph.id('a'), g.graph.id('b')]));
  const canceled = g.graph.published.filter((p) => p.kind === 'task-graph-canceled');
  assert.deepEqual(canceled, [{ kind: 'task-graph-canceled', seq: 0, state: 'canceled', blockedBy: [], reason: 'canceled through Temporal by fake-identity: fake reason' }]);
  // no workflow task failed on the way (the cancellation's timers and activities end quietly)
  const { events } = await g.handle.fetchHistory();
  assert.equal((events ?? []).filter((e) => e.workflowTaskFailedEventAttributes).length, 0, 'no workflow task failed');
});

test('a Temporal cancellation while the graph loads: the load is finished, then every task is canceled and canceled published', async () => {
  const taskGraphId = slugid.nice();
  const graph = new FakeGraph(taskGraphId, [{ label: 'a' }, { label: 'b', requires: ['a'] }]);
  let open!: () => void;
  graph.loadGate = new Promise<void>((resolve) => (open = resolve));
  graphs.set(taskGraphId, graph);
  const handle = await env.client.workflow.start<TaskGraphWorkflow>(WORKFLOW_TYPE, {
    taskQueue: env.taskQueue,
    workflowId: workflowIdFor(taskGraphId),
    args: [{ taskGraphId } satisfies TaskGraphInput],
  });
  await graph.until(() => graph.loadCalls > 0, 'the load asked for');
  await handle.cancel();
  await new Promise((r) => setTimeout(r, 300));
  open();
  await assert.rejects(handle.result(), (err: unknown) => err instanceof WorkflowFailedError && err.cause instanceof CancelledFailure);
  assert.deepEqual(new Set(graph.canceled), new Set([graph.id('a'), graph.id('b')]));
  assert.deepEqual(graph.published.map((p) => `${p.kind}#${p.seq}:${p.state}`), ['task-graph-canceled#0:canceled']);
  assert.equal(graph.dispatched.length, 0, 'nothing dispatched');
  const { events } = await handle.fetchHistory();
  await Worker.runReplayHistory({ workflowBundle: await workflowBundle() }, { events }, handle.workflowId);
});
