import { test } from 'node:test';
import assert from 'node:assert/strict';
import { GraphModel, NODE_STATE_NAMES } from '../../src/workflows/graphModel.js';
import { amendRefusal, applyAmend } from '../../src/workflows/amend.js';
import { pageFor } from '../helpers/graphPages.js';

/** The workflow's side of an amend (src/workflows/amend.ts) on the pure model. */
function blockedGraph() {
  const model = new GraphModel();
  const { page, ids } = pageFor([{ label: 'build' }, { label: 'test', requires: ['build'] }, { label: 'docs' }]);
  model.addPage(page);
  const idx = (label: string) => model.index.get(ids.get(label) as string) as number;
  model.dispatched(model.takeDispatch(100));
  model.applyResolution(ids.get('build') as string, 0, 'failed');
  model.applyResolution(ids.get('docs') as string, 0, 'completed');
  return { model, idx };
}

test('superseding the failed build and its waiting test unblocks the graph; neither is dispatched or counted again', () => {
  const { model, idx } = blockedGraph();
  assert.equal(model.graphState(), 'blocked');
  const accepted = applyAmend(model, { nodeCount: 5, superseded: [idx('build'), idx('test')] });
  assert.deepEqual(accepted, { superseded: 2, nodeCount: 5 });
  assert.equal(model.memberCount, 1);
  assert.deepEqual(model.blockedBy(), []);
  // only docs is a member, and it completed: until the new nodes load, the loop loads before it judges the state
  assert.equal(model.graphState(), 'finished');
  assert.equal(NODE_STATE_NAMES[model.state[idx('test')]], 'exception', 'the waiting test counts as canceled');
  assert.deepEqual(model.takeDispatch(100), []);
  // repeated (a retried update): nothing changes
  assert.deepEqual(applyAmend(model, { nodeCount: 5, superseded: [idx('build'), idx('test')] }), { superseded: 0, nodeCount: 5 });
  assert.equal(model.memberCount, 1);
});

test('an amend update of the wrong shape, or to a canceled graph, is refused by its validator', () => {
  const { model } = blockedGraph();
  assert.equal(amendRefusal(model, { nodeCount: 3, superseded: [0] }), undefined);
  assert.match(amendRefusal(model, { nodeCount: -1, superseded: [] }) ?? '', /nodeCount/);
  assert.match(amendRefusal(model, { nodeCount: 3, superseded: [7] }) ?? '', /superseded/);
  assert.match(amendRefusal(model, { nodeCount: 3, superseded: ['x' as unknown as number] }) ?? '', /superseded/);
  assert.match(amendRefusal(model, undefined) ?? '', /nodeCount/);
  model.canceled = true;
  assert.match(amendRefusal(model, { nodeCount: 3, superseded: [] }) ?? '', /canceled/);
});
