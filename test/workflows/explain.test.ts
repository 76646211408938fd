import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { GraphModel, NODE } from '../../src/workflows/graphModel.js';
import { explainModel } from '../../src/workflows/explain.js';
import { pageFor, type NodeSpec } from '../helpers/graphPages.js';

function explain(specs: NodeSpec[], limit = 100) {
  const model = new GraphModel();
  const { page, ids } = pageFor(specs);
  model.addPage(page);
  const labels = specs.map((s) => (s.member === false ? '' : s.label));
  const byId = new Map([...ids].map(([l, t]) => [t, l]));
  const result = explainModel(model, labels, limit);
  return { result, causes: result.causes.map((c) => `${c.kind}:${c.taskId ? byId.get(c.taskId) : ''}:${c.count}`) };
}

test('one failed task explains every task below it, however deep; the rest wait on live tasks', () => {
  const specs: NodeSpec[] = [
    { label: 'build', queueState: 'f' },
    { label: 'gpu', queueState: 'p' },
    ...Array.from({ length: 5 }, (_, i) => ({ label: `test-${i}`, requires: ['build'] })),
    { label: 'package', requires: ['test-0', 'test-1', 'gpu'] },
    { label: 'publish', requires: ['package'] },
    { label: 'render', requires: ['gpu'] },
  ];
  const { result, causes } = explain(specs);
  assert.equal(result.state, 'blocked');
  // package waits on both, and is counted once: under the failed task
  assert.deepEqual(causes, ['failed:build:7', 'live:gpu:2']);
  assert.equal(result.unresolved, 9);
  assert.equal(result.waiting, 8);
});

test('a graph waiting on another group\'s task, and a waiting task no source explains (stuck)', () => {
  const { causes } = explain([
    { label: 'ext', member: false, queueState: 'r' },
    { label: 'a', requires: ['ext'] },
    { label: 'b', requires: ['a'] },
    { label: 'done', queueState: 'c' },
  ]);
  assert.deepEqual(causes, ['external:ext:2']);
  // a waiting node whose requirement is completed: the model would have made it ready; forced here
  const model = new GraphModel();
  const { page } = pageFor([{ label: 'x', queueState: 'c' }, { label: 'y', requires: ['x'] }]);
  model.addPage(page);
  model.state[1] = NODE.waiting;
  const r = explainModel(model, ['x', 'y'], 10);
  assert.deepEqual(r.causes.map((c) => `${c.kind}:${c.count}`), ['stuck:1']);
});

test('every unresolved member is counted exactly once, whatever the graph (property)', () => {
  fc.assert(
    fc.property(
      fc.array(fc.tuple(fc.constantFrom<NodeSpec['queueState']>('u', 'p', 'r', 'c', 'f', 'e'), fc.array(fc.nat(), { maxLength: 3 })), { minLength: 1, maxLength: 60 }),
      (nodes) => {
        const specs: NodeSpec[] = nodes.map(([state, reqs], i) => ({
          label: `n${i}`,
          // requires point backwards: no cycles
          requires: i === 0 ? [] : [...new Set(reqs.map((r) => `n${r % i}`))],
          queueState: state,
        }));
        const model = new GraphModel();
        model.addPage(pageFor(specs).page);
        const r = explainModel(model, specs.map((s) => s.label), 1_000);
        let unresolvedMembers = 0;
        for (let i = 0; i < model.size; i++) {
          const s = model.state[i];
          if (s !== NODE.completed && s !== NODE.failed && s !== NODE.exception) unresolvedMembers++;
        }
        assert.equal(r.unresolved, unresolvedMembers);
        assert.equal(r.causes.reduce((n, c) => n + c.count, 0), unresolvedMembers);
      },
    ),
  );
});

test('at most `limit` causes, the ones explaining most first; the rest are counted', () => {
  const specs: NodeSpec[] = Array.from({ length: 10 }, (_, i) => ({ label: `p${i}`, queueState: 'p' as const }));
  specs.push({ label: 'wide', requires: ['p3'] }, { label: 'wider', requires: ['p3'] });
  const { result, causes } = explain(specs, 3);
  assert.equal(causes[0], 'live:p3:3');
  assert.equal(result.causes.length, 3);
  assert.equal(result.omittedCauses, 7);
});
