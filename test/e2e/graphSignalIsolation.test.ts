import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { eventually } from '../../support/stack.js';
import { graphOf } from '../../support/graphs.js';
import { extendedSignal, statusQuery, workflowIdFor } from '../../src/workflows/contract.js';
import { useStack } from '../helpers/stackFixture.js';

// Temporal refuses the 5th signal of a workflow execution: a real signal failure for one chosen graph. The relay's
// graph-signal lane (src/relay/graphSignalLane.ts) signals the graphs; no bridge runs.
const SIGNAL_LIMIT = 4;
const log: string[] = [];
const stack = useStack({ inProcessBridge: false, dynamicConfig: { 'history.maximumSignalsPerExecution': SIGNAL_LIMIT }, log: (line) => log.push(line) });

function manualGraph(nodes: Parameters<typeof graphOf>[0]) {
  const graph = graphOf(nodes);
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = 'manual';
  return graph;
}
const laneRows = async (graphId: string) =>
  (await stack.api.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM graph_signals WHERE task_graph_id = $1', [graphId])).rows[0].n;

test('a graph whose signal fails is retried alone with backoff; the graph signalled beside it goes on', async () => {
  const ids: Record<string, Map<string, string>> = {};
  const graphs: Record<string, string> = { failing: slugid.nice(), healthy: slugid.nice() };
  const shapes = { failing: manualGraph({ first: {}, second: { requires: ['first'] } }), healthy: manualGraph({ only: {} }) };
  for (const [name, id] of Object.entries(graphs)) {
    const res = await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${id}`, shapes[name as keyof typeof shapes]);
    ids[name] = new Map((res.body.tasks as { label: string; taskId: string }[]).map((t) => [t.label, t.taskId]));
  }
  const failingHandle = stack.client.workflow.getHandle(workflowIdFor(graphs.failing));
  for (let i = 0; i < SIGNAL_LIMIT; i++) await failingHandle.signal(extendedSignal, { nodeCount: 0 });
  await assert.rejects(failingHandle.signal(extendedSignal, { nodeCount: 0 }), 'the failing graph refuses further signals');

  const state = async (taskId: string) => (await stack.api.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status.state as string;
  const first = ids.failing.get('first') as string;
  const only = ids.healthy.get('only') as string;
  await eventually(async () => (await state(first)) === 'pending' && (await state(only)) === 'pending', 'roots pending');
  // The dispatch activity reports back what it finds resolved when it ends (a fast worker's run): claim only once
  // it has ended, or the failing graph could learn of `first` from it instead of from a signal (seen under load).
  await eventually(async () => (await failingHandle.query(statusQuery)).counts.scheduled === 1, "the failing graph's dispatch ended");
  const claim = await stack.api.request('POST', '/api/queue/v1/claim-work/tgs-test/manual', { tasks: 2, workerGroup: 'g', workerId: 'w' });
  assert.equal(claim.body.tasks.length, 2);
  const relay = stack.relay;
  assert.ok(relay);
  const failedBefore = relay.stats.failedSignals ?? 0;
  // both resolutions in one report statement: the lane's first flush signals both graphs
  await Promise.all([first, only].map((taskId) => stack.api.request('POST', `/api/queue/v1/task/${taskId}/runs/0/completed`)));
  await eventually(async () => (relay.stats.failedSignals ?? 0) > failedBefore, 'the first refused signal', 10_000);
  const startedAt = Date.now();
  await eventually(
    async () => (await stack.api.request('GET', `/api/scheduler/v1/task-graph/${graphs.healthy}/status`)).body.status.state === 'finished',
    'the healthy graph finished',
    15_000,
  );
  await eventually(async () => (await laneRows(graphs.healthy)) === 0, "the healthy graph's row deleted once accepted");
  await eventually(async () => (relay.stats.failedSignals ?? 0) >= failedBefore + 3, 'the failing graph retried several times', 15_000);
  assert.equal(await state(ids.failing.get('second') as string), 'unscheduled', 'the failing graph never heard its resolution');
  assert.equal(await laneRows(graphs.failing), 1, "the failing graph's row is kept");
  assert.equal(log.filter((l) => l.includes(`signal to task-graph/${graphs.failing} failed`)).length, 1, 'its failure is logged once');
  assert.deepEqual(log.filter((l) => l.includes(graphs.healthy)), [], 'nothing about the healthy graph');
  // Backoff 250 ms doubling: attempts at ~0, 0.25, 0.75, 1.75, 3.75 s; without it, hundreds in 4 s.
  await new Promise((r) => setTimeout(r, Math.max(0, startedAt + 4000 - Date.now())));
  const failed = (relay.stats.failedSignals ?? 0) - failedBefore;
  assert.ok(failed >= 3 && failed <= 6, `${failed} attempts in 4 s`);
});
