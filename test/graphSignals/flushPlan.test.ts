import { test } from 'node:test';
import assert from 'node:assert/strict';
import { confirmByStoredState, definedSignals, recordedSignals, resolutionSignals } from '../../src/graphSignals/flushPlan.js';
import type { Resolution } from '../../src/workflows/contract.js';

const msg = (taskId: string, runId: number, state: Resolution['state']) => ({ taskId, resolution: { taskId, runId, state } as Resolution });

test("confirmByStoredState: the row's latest run decides; the row's reason is what graphs hear", () => {
  const a = msg('A', 0, 'completed');
  const forged = msg('B', 0, 'completed');
  const stale = msg('C', 0, 'failed');
  const unknown = msg('Z', 0, 'completed');
  const result = confirmByStoredState(
    [a, forged, stale, unknown],
    [
      { task_id: 'A', run_id: 0, state: 'completed', reason: 'completed' },
      { task_id: 'B', run_id: 0, state: 'running', reason: null },
      { task_id: 'C', run_id: 1, state: 'pending', reason: null },
    ],
  );
  assert.deepEqual(result.confirmed, [{ msg: a, resolution: { taskId: 'A', runId: 0, state: 'completed', reasonResolved: 'completed' } }]);
  // a later run stored: the message was overtaken by a rerun (ordinary); the same run in another state: forged
  assert.deepEqual(result.overtaken, [stale]);
  assert.deepEqual(result.disagreed, [forged]);
  assert.deepEqual(result.unknown, [unknown]);
});

test('resolutionSignals: one signal per graph hearing a task, carrying every message of the tasks it has as nodes', () => {
  const a = msg('A', 0, 'completed');
  const a2 = msg('A', 0, 'completed'); // the same resolution delivered twice in one flush: both acked with the signal
  const b = msg('B', 0, 'failed');
  const confirmed = [a, a2, b].map((m) => ({ msg: m, resolution: m.resolution }));
  const signals = resolutionSignals(confirmed, [
    { task_graph_id: 'G1', task_id: 'A', origin: 'graph' },
    { task_graph_id: 'G1', task_id: 'B', origin: 'graph' },
    // G2 depends on A from another group (an external node)
    { task_graph_id: 'G2', task_id: 'A', origin: 'queue' },
  ]);
  assert.deepEqual(
    signals.map((s) => ({ key: s.key, origin: s.origin, msgs: s.msgs, resolutions: s.resolutions.map((r) => r.taskId) })),
    [
      { key: 'G1', origin: 'graph', msgs: [a, a2, b], resolutions: ['A', 'A', 'B'] },
      { key: 'G2', origin: 'queue', msgs: [a, a2], resolutions: ['A', 'A'] },
    ],
  );
  assert.deepEqual(resolutionSignals(confirmed, []), [], 'a task no live graph has: nobody to signal');
});

test('definedSignals: tasks joining a group go in one signal to that group', () => {
  const d1 = { taskId: 'D1' };
  const d2 = { taskId: 'D2' };
  const other = { taskId: 'E' };
  const signals = definedSignals([d1, d2, other], [
    { task_id: 'D1', task_group_id: 'G' },
    { task_id: 'D2', task_group_id: 'G' },
  ]);
  assert.deepEqual(signals, [{ key: 'G', taskIds: ['D1', 'D2'], msgs: [d1, d2] }]);
});

test("recordedSignals: the lane's rows, one signal a graph, each graph's rows in their order", () => {
  const row = (graph: string, taskId: string, origin = 'graph') => ({ task_graph_id: graph, message_id: `${taskId}/0`, origin, resolution: { taskId, runId: 0, state: 'completed' as const }, recorded_at: 0 });
  const [g1a, g2a, g1b] = [row('G1', 'A'), row('G2', 'A', 'queue'), row('G1', 'B')];
  assert.deepEqual(recordedSignals([g1a, g2a, g1b]), [
    { key: 'G1', origin: 'graph', msgs: [g1a, g1b], resolutions: [g1a.resolution, g1b.resolution] },
    { key: 'G2', origin: 'queue', msgs: [g2a], resolutions: [g2a.resolution] },
  ]);
  assert.deepEqual(recordedSignals([]), []);
});
