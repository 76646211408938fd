import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GraphModel, NODE, NODE_STATE_NAMES } from '../../src/workflows/graphModel.js';
import fc from 'fast-check';
import type { NodePage } from '../../src/workflows/contract.js';
import { pageFor, slicePage, type NodeSpec } from '../helpers/graphPages.js';
import { fuzzParameters } from '../helpers/fuzz.js';

function build(specs: NodeSpec[]) {
  const model = new GraphModel();
  const { page, ids } = pageFor(specs);
  model.addPage(page);
  const id = (label: string) => ids.get(label) as string;
  const stateOf = (label: string) => NODE_STATE_NAMES[model.state[model.index.get(id(label)) as number]];
  /** Dispatches everything ready and marks it scheduled, returning the labels dispatched. */
  const dispatchAll = () => {
    const items = model.takeDispatch(1000);
    model.dispatched(items);
    const byId = new Map([...ids].map(([l, t]) => [t, l]));
    return items.map((i) => `${i.kind}:${byId.get(i.taskId)}`).sort();
  };
  return { model, id, stateOf, dispatchAll };
}

const diamond: NodeSpec[] = [
  { label: 'build' },
  { label: 'test-a', requires: ['build'] },
  { label: 'test-b', requires: ['build'] },
  { label: 'package', requires: ['test-a', 'test-b'] },
];

test('a diamond runs in dependency order and finishes (operation G3)', () => {
  const g = build(diamond);
  assert.deepEqual(g.dispatchAll(), ['schedule:build']);
  assert.equal(g.model.graphState(), 'running');
  assert.equal(g.model.liveMemberCount(), 1);
  g.model.applyResolution(g.id('build'), 0, 'completed');
  assert.equal(g.model.liveMemberCount(), 0);
  assert.deepEqual(g.dispatchAll(), ['schedule:test-a', 'schedule:test-b']);
  assert.equal(g.model.liveMemberCount(), 2);
  assert.equal(g.model.liveMembers().length, 2);
  g.model.applyResolution(g.id('test-a'), 0, 'completed');
  assert.deepEqual(g.dispatchAll(), [], 'package still waits for test-b');
  assert.equal(g.model.liveMemberCount(), 1);
  assert.equal(g.stateOf('package'), 'waiting');
  g.model.applyResolution(g.id('test-b'), 0, 'completed');
  assert.deepEqual(g.dispatchAll(), ['schedule:package']);
  g.model.applyResolution(g.id('package'), 0, 'completed');
  assert.equal(g.model.graphState(), 'finished');
  assert.deepEqual(g.model.countsByName(), { completed: 4 });
});

test('a failed task is rerun while reruns are left, then blocks the graph (operations C and D)', () => {
  const g = build([{ label: 'flaky', reruns: 2 }, { label: 'after', requires: ['flaky'] }]);
  g.dispatchAll();
  g.model.applyResolution(g.id('flaky'), 0, 'failed');
  let items = g.model.takeDispatch(10);
  assert.equal(items.length, 1);
  assert.equal(items[0].kind, 'rerun');
  assert.equal(items[0].expectedRunId, 0);
  assert.equal(items[0].rerunsLeft, 1);
  g.model.dispatched(items);
  g.model.applyResolution(g.id('flaky'), 1, 'failed');
  items = g.model.takeDispatch(10);
  assert.equal(items[0].rerunsLeft, 0);
  g.model.dispatched(items);
  assert.equal(g.model.graphState(), 'running');
  g.model.applyResolution(g.id('flaky'), 2, 'failed');
  assert.equal(g.stateOf('flaky'), 'failed');
  assert.equal(g.model.graphState(), 'blocked');
  assert.deepEqual(g.model.blockedBy(), [g.id('flaky')]);
  assert.deepEqual(g.model.takeDispatch(10), [], 'nothing to do: after never runs');
});

test('a task that fails twice and passes on its third run completes the graph with reruns=2', () => {
  const g = build([{ label: 'flaky', reruns: 2 }, { label: 'after', requires: ['flaky'] }]);
  g.dispatchAll();
  g.model.applyResolution(g.id('flaky'), 0, 'failed');
  g.dispatchAll();
  g.model.applyResolution(g.id('flaky'), 1, 'failed');
  g.dispatchAll();
  g.model.applyResolution(g.id('flaky'), 2, 'completed');
  assert.deepEqual(g.dispatchAll(), ['schedule:after']);
  g.model.applyResolution(g.id('after'), 0, 'completed');
  assert.equal(g.model.graphState(), 'finished');
});

test('an exception blocks the graph without using reruns', () => {
  const g = build([{ label: 'a', reruns: 3 }]);
  g.dispatchAll();
  g.model.applyResolution(g.id('a'), 0, 'exception');
  assert.equal(g.model.graphState(), 'blocked');
  assert.equal(g.model.rerunsLeft[0], 3);
});

test('duplicate and out-of-order resolutions are ignored by (taskId, runId)', () => {
  const g = build([{ label: 'a', reruns: 1 }, { label: 'b', requires: ['a'] }]);
  g.dispatchAll();
  assert.equal(g.model.applyResolution(g.id('a'), 0, 'failed'), true);
  assert.equal(g.model.applyResolution(g.id('a'), 0, 'failed'), false, 'duplicate');
  g.dispatchAll();
  assert.equal(g.model.applyResolution(g.id('a'), 1, 'completed'), true);
  assert.equal(g.model.applyResolution(g.id('a'), 0, 'failed'), false, 'stale run');
  assert.equal(g.stateOf('a'), 'completed');
  assert.equal(g.model.requiresLeft[1], 0);
  assert.deepEqual(g.dispatchAll(), ['schedule:b']);
  assert.equal(g.model.applyResolution('nonexistent-task-id-xx', 0, 'completed'), false);
});

test('a resolution that arrives while its dispatch is in flight is kept', () => {
  const g = build([{ label: 'a' }, { label: 'b', requires: ['a'] }]);
  const items = g.model.takeDispatch(10);
  g.model.applyResolution(g.id('a'), 0, 'completed');
  g.model.dispatched(items);
  assert.equal(g.stateOf('a'), 'completed');
  assert.deepEqual(g.dispatchAll(), ['schedule:b']);
});

test('a manual rerun unblocks the graph; refused for unresolved tasks', () => {
  const g = build([{ label: 'a' }, { label: 'b', requires: ['a'] }]);
  g.dispatchAll();
  assert.match(g.model.rerunRefusal(0, 'a') ?? '', /only a resolved task/);
  assert.match(g.model.rerunRefusal(undefined, 'task x') ?? '', /not a task of this task-graph/);
  g.model.applyResolution(g.id('a'), 0, 'failed');
  assert.equal(g.model.graphState(), 'blocked');
  assert.equal(g.model.rerunRefusal(0, 'a'), undefined);
  g.model.manualRerun(0, false);
  assert.equal(g.model.graphState(), 'running');
  const items = g.model.takeDispatch(10);
  assert.deepEqual(items.map((i) => [i.kind, i.expectedRunId, i.rerunsLeft]), [['rerun', 0, undefined]]);
  g.model.dispatched(items);
  g.model.applyResolution(g.id('a'), 1, 'completed');
  assert.deepEqual(g.dispatchAll(), ['schedule:b']);
  g.model.applyResolution(g.id('b'), 0, 'completed');
  assert.equal(g.model.graphState(), 'finished');
});

test('a manual rerun with resetDependents reruns resolved dependents after the task completes again', () => {
  const g = build([{ label: 'a' }, { label: 'b', requires: ['a'] }, { label: 'c', requires: ['b'] }, { label: 'd' }]);
  for (const label of ['a', 'b', 'c', 'd']) {
    g.dispatchAll();
    g.model.applyResolution(g.id(label), 0, 'completed');
  }
  assert.equal(g.model.graphState(), 'finished');
  const reset = g.model.manualRerun(0, true);
  assert.equal(reset.length, 2);
  assert.equal(g.stateOf('b'), 'waiting');
  assert.equal(g.stateOf('c'), 'waiting');
  assert.equal(g.stateOf('d'), 'completed');
  assert.deepEqual(g.dispatchAll(), ['rerun:a']);
  g.model.applyResolution(g.id('a'), 1, 'completed');
  assert.deepEqual(g.dispatchAll(), ['rerun:b']);
  g.model.applyResolution(g.id('b'), 1, 'completed');
  assert.deepEqual(g.dispatchAll(), ['rerun:c']);
  g.model.applyResolution(g.id('c'), 1, 'completed');
  assert.equal(g.model.graphState(), 'finished');
});

test('without resetDependents, completed dependents are left alone', () => {
  const g = build([{ label: 'a' }, { label: 'b', requires: ['a'] }]);
  g.dispatchAll();
  g.model.applyResolution(g.id('a'), 0, 'completed');
  g.dispatchAll();
  g.model.applyResolution(g.id('b'), 0, 'completed');
  g.model.manualRerun(0, false);
  assert.deepEqual(g.dispatchAll(), ['rerun:a']);
  assert.equal(g.stateOf('b'), 'completed');
  g.model.applyResolution(g.id('a'), 1, 'completed');
  assert.deepEqual(g.dispatchAll(), []);
  assert.equal(g.model.graphState(), 'finished');
});

test('all-resolved dependents run after a failed external dependency; all-completed ones do not', () => {
  const g = build([
    { label: 'ext', member: false },
    { label: 'lenient', requires: ['ext'], allResolved: true },
    { label: 'strict', requires: ['ext'] },
  ]);
  assert.deepEqual(g.dispatchAll(), []);
  g.model.applyResolution(g.id('ext'), 0, 'failed');
  assert.deepEqual(g.dispatchAll(), ['schedule:lenient']);
  assert.equal(g.stateOf('strict'), 'waiting');
  assert.equal(g.model.memberCount, 2, 'externals are not members');
});

test('state carried across continue-as-new restores the same graph', () => {
  const specs: NodeSpec[] = [{ label: 'a', reruns: 1 }, { label: 'b', requires: ['a'] }, { label: 'c', requires: ['a'] }, { label: 'd', requires: ['b', 'c'] }];
  const model = new GraphModel();
  const { page, ids } = pageFor(specs);
  model.addPage(page);
  model.dispatched(model.takeDispatch(10));
  model.applyResolution(ids.get('a') as string, 0, 'failed');
  model.dispatched(model.takeDispatch(10));
  model.applyResolution(ids.get('a') as string, 1, 'completed');
  model.dispatched(model.takeDispatch(1));
  model.applyResolution(ids.get('b') as string, 0, 'completed');
  const carried = { ...model.carry(), publishedState: null, messageSeq: {}, runs: 1, rejected: [] };
  const restored = new GraphModel();
  restored.addPage({ ...page, queueStates: undefined, latestRuns: undefined }, GraphModel.decodeCarried(carried));
  assert.deepEqual([...restored.state.subarray(0, 4)], [...model.state.subarray(0, 4)]);
  assert.deepEqual([...restored.requiresLeft.subarray(0, 4)], [...model.requiresLeft.subarray(0, 4)]);
  assert.deepEqual([...restored.rerunsLeft.subarray(0, 4)], [0, 0, 0, 0]);
  assert.deepEqual(restored.countsByName(), model.countsByName());
  assert.equal(restored.applyResolution(ids.get('a') as string, 1, 'completed'), false, 'lastRun survives');
  const items = restored.takeDispatch(10);
  assert.deepEqual(items.map((i) => i.taskId), [ids.get('c')], 'c was ready, not dispatched yet');
});

test('initial state comes from the queue when the workflow starts from Postgres', () => {
  const g = build([
    { label: 'done', queueState: 'c' },
    { label: 'live', queueState: 'r' },
    { label: 'flaky', queueState: 'f', reruns: 1 },
    { label: 'next', requires: ['done'] },
    { label: 'later', requires: ['live'] },
  ]);
  assert.equal(g.stateOf('live'), 'scheduled');
  assert.equal(g.stateOf('flaky'), 'rerunPending');
  assert.deepEqual(g.dispatchAll(), ['rerun:flaky', 'schedule:next']);
  assert.equal(g.stateOf('later'), 'waiting');
  assert.equal(g.model.applyResolution(g.id('done'), 0, 'completed'), false, 'already applied');
  assert.equal(g.model.applyResolution(g.id('live'), 0, 'completed'), true);
});

test('nodes added later (extend) can require existing ones', () => {
  const model = new GraphModel();
  const first = pageFor([{ label: 'a' }]);
  model.addPage(first.page);
  model.dispatched(model.takeDispatch(10));
  model.applyResolution(first.ids.get('a') as string, 0, 'completed');
  assert.equal(model.graphState(), 'finished');
  const second = pageFor([{ label: 'b', requires: ['a'] }, { label: 'c', requires: ['b'] }], 1, new Map([['a', 0]]));
  model.addPage(second.page);
  assert.equal(model.graphState(), 'running');
  const items = model.takeDispatch(10);
  assert.deepEqual(items.map((i) => i.taskId), [second.ids.get('b')]);
  assert.equal(model.state[2], NODE.waiting);
});

test('carried state fits the 2 MB payload limit for 100,000 tasks', () => {
  const specs: NodeSpec[] = Array.from({ length: 100_000 }, (_, i) => ({ label: `t${i}`, requires: i > 0 ? [`t${i - 1}`] : [] }));
  const model = new GraphModel();
  model.addPage(pageFor(specs).page);
  const size = JSON.stringify(model.carry()).length;
  assert.ok(size < 1_000_000, `carried state is ${size} bytes`);
});

test('a rerun the queue refuses (50 runs, deadline) keeps the failure, so the graph blocks instead of waiting', () => {
  const g = build([{ label: 'flaky', reruns: 5 }, { label: 'after', requires: ['flaky'] }]);
  g.dispatchAll();
  g.model.applyResolution(g.id('flaky'), 0, 'failed');
  const items = g.model.takeDispatch(10);
  assert.equal(items[0].kind, 'rerun');
  g.model.dispatched(items);
  assert.equal(g.stateOf('flaky'), 'scheduled');
  assert.equal(g.model.rerunRefused(g.id('flaky'), 'failed'), true);
  assert.equal(g.stateOf('flaky'), 'failed');
  assert.equal(g.model.graphState(), 'blocked');
  assert.deepEqual(g.model.blockedBy(), [g.id('flaky')]);
  assert.equal(g.model.rerunRefused(g.id('flaky'), 'failed'), false, 'a second report changes nothing');
  assert.equal(g.model.rerunRefused(g.id('after'), 'failed'), false, 'a waiting node is not touched');
});

/** Loads `page` cut at the given points, as a run loads a graph of more than one page. */
function loadInPages(page: NodePage, cuts: number[], carried?: ReturnType<typeof GraphModel.decodeCarried>): GraphModel {
  const model = new GraphModel();
  const n = page.taskIds.length / 22;
  const bounds = [0, ...[...new Set(cuts.filter((c) => c > 0 && c < n))].sort((a, b) => a - b), n];
  for (let k = 0; k + 1 < bounds.length; k++) model.addPage(slicePage(page, bounds[k], bounds[k + 1]), carried);
  return model;
}

const sameModel = (a: GraphModel, b: GraphModel) => {
  assert.deepEqual([...a.state.subarray(0, a.size)], [...b.state.subarray(0, b.size)], 'states');
  assert.deepEqual([...a.requiresLeft.subarray(0, a.size)], [...b.requiresLeft.subarray(0, b.size)], 'requires left');
  const dispatch = (m: GraphModel) => m.takeDispatch(1000).map((i) => `${i.kind}:${i.taskId}`).sort();
  assert.deepEqual(dispatch(a), dispatch(b), 'what is dispatched');
};

/**
 * A graph in any order of first mention, with any queue states, cut into pages anywhere: labels named before they
 * are defined get later idxs, so a node may require one of a later page.
 */
const pagedGraph = fc
  .integer({ min: 2, max: 30 })
  .chain((n) =>
    fc.record({
      // the dependency order: a node may require only nodes before it here, whatever their idxs
      order: fc.shuffledSubarray([...Array(n).keys()], { minLength: n, maxLength: n }),
      requires: fc.array(fc.array(fc.nat(n - 1), { maxLength: 4 }), { minLength: n, maxLength: n }),
      states: fc.array(fc.constantFrom('u', 'p', 'r', 'c', 'f', 'e' as const), { minLength: n, maxLength: n }),
      allResolved: fc.array(fc.boolean(), { minLength: n, maxLength: n }),
      reruns: fc.array(fc.integer({ min: 0, max: 1 }), { minLength: n, maxLength: n }),
      cuts: fc.array(fc.integer({ min: 1, max: n - 1 }), { maxLength: 4 }),
    }),
  )
  .map(({ order, requires, states, allResolved, reruns, cuts }) => {
    const rank = new Map(order.map((idx, r) => [idx, r]));
    const specs: NodeSpec[] = order.map((_, idx) => ({
      label: `n${idx}`,
      requires: [...new Set(requires[idx].filter((r) => (rank.get(r) as number) < (rank.get(idx) as number)))].map((r) => `n${r}`),
      queueState: states[idx],
      allResolved: allResolved[idx],
      reruns: reruns[idx],
    }));
    return { specs, cuts };
  });

test('a graph loaded in pages is the graph loaded whole, whatever requires what across the pages (fuzzed)', () => {
  fc.assert(
    fc.property(pagedGraph, ({ specs, cuts }) => {
      const { page } = pageFor(specs);
      const whole = new GraphModel();
      whole.addPage(page);
      sameModel(loadInPages(page, cuts), whole);
    }),
    fuzzParameters(300),
  );
});

test('a continued run that loads in pages restores the state carried, whatever requires what across the pages (fuzzed)', () => {
  fc.assert(
    fc.property(pagedGraph, ({ specs, cuts }) => {
      const { page } = pageFor(specs);
      const before = new GraphModel();
      before.addPage(page);
      // some work done before continuing as new: what was ready is dispatched
      before.dispatched(before.takeDispatch(1000));
      const carried = GraphModel.decodeCarried({ ...before.carry(), publishedState: null, messageSeq: {}, runs: 1, rejected: [] });
      const whole = new GraphModel();
      whole.addPage({ ...page, queueStates: undefined, latestRuns: undefined }, carried);
      sameModel(loadInPages({ ...page, queueStates: undefined, latestRuns: undefined }, cuts, carried), whole);
    }),
    fuzzParameters(300),
  );
});
