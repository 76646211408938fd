import { test } from 'node:test';
import assert from 'node:assert/strict';
import { expectedRuns, planGraph, rng, FOREVER } from '../../bench/chaos/load.js';
import { runChecks, type EndState, type TaskEnd } from '../../bench/chaos/checks.js';
import type { Seen } from '../../bench/chaos/observer.js';

// The chaos suite's checks over a hand-made end state: a clean one passes, and each kind of loss is caught.
const plan = planGraph('G', 2, 6, rng(7)); // a layered graph
for (const n of plan.nodes) Object.assign(n, { failTimes: 0, reruns: 0 });
const taskIds = new Map([['G', new Map(plan.nodes.map((n) => [n.label, `T-${n.label}`]))]]);
const t0 = Date.parse('2026-01-01T00:00:00Z');
const iso = (ms: number) => new Date(t0 + ms).toISOString();
// layer by layer, 100 ms apart: every task pending after its requirements completed
const layerOf = (label: string) => Number(/^l(\d+)/.exec(label)?.[1]);

function cleanEnd(): EndState {
  const tasks = new Map<string, TaskEnd>();
  const messages = new Map<string, Seen>();
  for (const n of plan.nodes) {
    const l = layerOf(n.label);
    const taskId = `T-${n.label}`;
    tasks.set(taskId, { taskId, graphId: 'G', runs: [{ runId: 0, state: 'completed', reasonCreated: 'scheduled', scheduled: iso(l * 100), started: iso(l * 100 + 10), resolved: iso(l * 100 + 50) }] });
    messages.set(`m-${taskId}`, { exchange: 'queue/v1/task-completed', routingKey: `${taskId}.0.chaos.w0.p.w.s.G._`, at: [t0] });
  }
  messages.set('m-G', { exchange: 'scheduler/v1/task-graph-finished', routingKey: '_._._._._._.s.G.chaos', at: [t0] });
  return {
    plans: [plan],
    taskIds,
    graphStates: new Map([['G', 'finished']]),
    tasks,
    outboxRows: 0,
    runningWorkflows: new Set(),
    messages,
    claims: plan.nodes.map((n) => ({ taskId: `T-${n.label}`, runId: 0, worker: 'w0', claimedAt: t0 + layerOf(n.label) * 100 + 10, doneAt: t0 + layerOf(n.label) * 100 + 50 })),
    handedTwice: [],
    unexpectedExits: [],
    gracefulCuts: [],
    gracefulStops: 0,
  };
}

const failing = (end: EndState) => runChecks(end).filter((c) => !c.ok).map((c) => c.name);

test('chaos checks: a clean end state passes every check', () => {
  assert.deepEqual(failing(cleanEnd()), []);
});

test('chaos checks: a lost message, an early task, a second holder, an extra run and a stuck graph are each caught', () => {
  const lost = cleanEnd();
  lost.messages.delete(`m-T-${plan.nodes[0].label}`);
  assert.deepEqual(failing(lost), ['every resolution and graph message arrived']);

  const early = cleanEnd();
  const last = plan.nodes.at(-1)!;
  early.tasks.get(`T-${last.label}`)!.runs[0].scheduled = iso(0);
  assert.deepEqual(failing(early), ['no task pending before its requirements completed']);

  const twice = cleanEnd();
  twice.claims.push({ taskId: `T-${last.label}`, runId: 1, worker: 'w1', claimedAt: twice.claims.at(-1)!.claimedAt + 1 });
  assert.deepEqual(failing(twice), ['no task with two workers at once']);

  const stillWorking = cleanEnd();
  const held = stillWorking.claims.at(-1)!;
  stillWorking.claims.push({ taskId: held.taskId, runId: 1, worker: 'w1', claimedAt: held.doneAt! - 1 });
  assert.deepEqual(failing(stillWorking), ['no task with two workers at once']);

  const extra = cleanEnd();
  extra.tasks.get(`T-${last.label}`)!.runs.push({ runId: 1, state: 'completed', reasonCreated: 'rerun' });
  extra.messages.set('m-extra', { exchange: 'queue/v1/task-completed', routingKey: `T-${last.label}.1.x`, at: [t0] });
  assert.deepEqual(failing(extra), ['runs as scripted (extra runs only from faults, with their reason)']);

  const stuck = cleanEnd();
  stuck.graphStates.set('G', 'running');
  stuck.runningWorkflows.add('G');
  stuck.outboxRows = 3;
  assert.deepEqual(failing(stuck), ['graph end states', 'outbox empty']);
});

test('chaos checks: a failed run retried by another worker while the first waits for its report\'s answer is no overlap', () => {
  const end = cleanEnd();
  const first = end.claims.at(-1)!;
  // the queue acted on the report (sent at doneAt) and another worker claimed the retry 5 ms later, whenever the
  // answer reached the first worker
  end.claims.push({ taskId: first.taskId, runId: 1, worker: 'w1', claimedAt: first.doneAt! + 5, doneAt: first.doneAt! + 40 });
  const failures = runChecks(end).find((c) => c.name === 'no task with two workers at once')!;
  assert.equal(failures.ok, true, failures.failures.join('; '));
});

test('chaos checks: a claim-expired run is counted as fault-added, not as a script violation', () => {
  const end = cleanEnd();
  const task = end.tasks.get(`T-${plan.nodes[0].label}`)!;
  task.runs = [{ runId: 0, state: 'exception', reasonCreated: 'scheduled', reasonResolved: 'claim-expired', scheduled: iso(0), resolved: iso(30) }, { ...task.runs[0], runId: 1, reasonCreated: 'retry' }];
  end.messages.set('m-exc', { exchange: 'queue/v1/task-exception', routingKey: `${task.taskId}.0.x`, at: [t0] });
  end.messages.set(`m-${task.taskId}`, { exchange: 'queue/v1/task-completed', routingKey: `${task.taskId}.1.x`, at: [t0] });
  assert.deepEqual(failing(end), []);
});

test('chaos scripts: a task that fails for good blocks its graph and nothing downstream runs', () => {
  const blocked = planGraph('B', 9, 10, rng(1), 10); // the tenth graph of ten: one task fails for good
  assert.equal(blocked.expected, 'blocked');
  const victim = blocked.nodes.find((n) => n.failTimes === FOREVER)!;
  assert.deepEqual(expectedRuns(victim, blocked.neverRuns), ['failed']);
  assert.ok(blocked.neverRuns.size > 0, 'the chain after it never runs');
  assert.deepEqual(expectedRuns({ label: 'x', requires: [], reruns: 2, failTimes: 2 }, new Set()), ['failed', 'failed', 'completed']);
});
