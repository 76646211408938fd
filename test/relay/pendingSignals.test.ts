import { test } from 'node:test';
import assert from 'node:assert/strict';
import { PendingSignals } from '../../src/relay/pendingSignals.js';
import { GRAPH_BACKOFF } from '../../src/graphSignals/signalBackoff.js';
import type { GraphSignalRow } from '../../src/relay/graphSignalStore.js';

const row = (graph: string, taskId: string, runId = 0): GraphSignalRow => ({
  task_graph_id: graph,
  message_id: `${taskId}/${runId}/task-completed`,
  origin: 'graph',
  resolution: { taskId, runId, state: 'completed' },
  recorded_at: 0,
});
const accepted = (signals: ReturnType<PendingSignals['take']>) => signals.map((s) => ({ key: s.key, msgs: s.msgs }));

test('a row is kept once per graph and message, however often it is heard', () => {
  const pending = new PendingSignals();
  assert.equal(pending.add([row('G1', 'A'), row('G2', 'A'), row('G1', 'A')]), 2);
  assert.equal(pending.add([row('G1', 'A'), row('G1', 'B')]), 1, 'a leftover loaded beside a read');
  assert.equal(pending.size, 3);
});

test('a flush takes one signal a graph, at most maxGraphs, and not a graph already in flight', () => {
  const pending = new PendingSignals();
  pending.add([row('G1', 'A'), row('G2', 'B'), row('G3', 'C'), row('G1', 'D')]);
  const first = pending.take(0, 2);
  assert.deepEqual(first.map((s) => [s.key, s.resolutions.map((r) => r.taskId)]), [['G1', ['A', 'D']], ['G2', ['B']]]);
  pending.add([row('G1', 'E')]);
  // G1 is in flight: its new row waits for the answer, G3 goes
  assert.deepEqual(pending.take(0, 2).map((s) => s.key), ['G3']);
  assert.equal(pending.nextAt(0), undefined, 'every graph with rows is in flight');
  const settled = pending.settle(first, accepted(first), 1);
  assert.deepEqual(settled.accepted.map((r) => r.resolution.taskId), ['A', 'D', 'B']);
  assert.deepEqual(pending.take(1, 64).map((s) => [s.key, s.resolutions.map((r) => r.taskId)]), [['G1', ['E']]], 'only what came during the flight');
});

test("a failing graph's rows wait out its backoff while the other graphs go on", () => {
  const pending = new PendingSignals();
  pending.add([row('bad', 'A'), row('good', 'B')]);
  const signals = pending.take(0, 64);
  const settled = pending.settle(signals, signals.map((s) => (s.key === 'bad' ? { key: s.key, msgs: s.msgs, error: new Error('refused') } : { key: s.key, msgs: s.msgs })), 1000);
  assert.deepEqual(settled.accepted.map((r) => r.task_graph_id), ['good']);
  assert.equal(settled.failedSignals, 1);
  assert.deepEqual(settled.startedFailing.map((f) => f.key), ['bad']);
  assert.equal(pending.size, 1);
  assert.equal(pending.nextAt(1000), 1000 + GRAPH_BACKOFF.firstMs);
  assert.deepEqual(pending.take(1000 + GRAPH_BACKOFF.firstMs - 1, 64), [], 'not before its backoff');
  pending.add([row('good', 'C')]);
  assert.deepEqual(pending.take(1001, 64).map((s) => s.key), ['good'], 'another graph is not held up');
  const again = pending.take(1000 + GRAPH_BACKOFF.firstMs, 64);
  assert.deepEqual(again.map((s) => s.key), ['bad']);
  // the second failure doubles the wait
  pending.settle(again, again.map((s) => ({ key: s.key, msgs: s.msgs, error: new Error('refused') })), 2000);
  assert.equal(pending.nextAt(2000), 2000 + 2 * GRAPH_BACKOFF.firstMs);
});

test('a flush that failed before any signal puts its graphs back after the delay; clear forgets everything', () => {
  const pending = new PendingSignals();
  pending.add([row('G1', 'A')]);
  const signals = pending.take(0, 64);
  pending.release(signals, 10, 500);
  assert.equal(pending.nextAt(10), 510);
  assert.deepEqual(pending.take(510, 64).map((s) => s.key), ['G1']);
  pending.clear();
  assert.equal(pending.size, 0);
  assert.equal(pending.nextAt(0), undefined);
  pending.add([row('G1', 'A')]);
  assert.deepEqual(pending.take(0, 64).map((s) => s.key), ['G1'], 'nothing in flight or backing off after clear');
});
