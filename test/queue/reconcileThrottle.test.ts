import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ReconcileThrottle } from '../../src/queue/reconcileThrottle.js';

test('one reconcile signal a graph per interval; graphs apart; the oldest forgotten as they expire, none beyond the bound', () => {
  const t = new ReconcileThrottle(10_000, 3);
  assert.equal(t.take('a', 0), true);
  assert.equal(t.take('a', 9_999), false, 'within the interval');
  assert.equal(t.take('b', 5_000), true, 'another graph');
  assert.equal(t.take('a', 10_000), true, 'the interval passed');
  assert.equal(t.take('c', 10_001), true);
  assert.equal(t.take('d', 10_002), false, 'three remembered, none expired: no room');
  assert.equal(t.take('d', 15_000), true, 'b expired and went');
});
