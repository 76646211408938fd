import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { eventually } from '../../support/stack.js';
import { graphOf } from '../../support/graphs.js';
import { useStack } from '../helpers/stackFixture.js';

// Continue-as-new forced by the server: the dev server suggests it after 120 events instead of 4,096
// (a lowered `--dynamic-config-value`), while the workflow's own backstop stays at 10,000 events.
const runsByTask = new Map<string, number>();

const stack = useStack({
  dynamicConfig: { 'limit.historyCount.suggestContinueAsNew': 120 },
  worker: {
    concurrency: 4,
    decide: (task) => {
      runsByTask.set(task.taskId, (runsByTask.get(task.taskId) ?? 0) + 1);
      // every fifth task fails once and passes on its rerun, so reruns cross run boundaries too
      return task.task.payload.flaky && task.runId === 0 ? 'failed' : 'completed';
    },
  },
});

test('a 60-task chain finishes across several continue-as-new runs suggested by the server', async () => {
  const nodes: Record<string, { requires?: string[]; reruns?: number; payload?: Record<string, unknown> }> = {};
  for (let i = 0; i < 60; i++) {
    nodes[`t${i}`] = { requires: i ? [`t${i - 1}`] : [], reruns: 1, payload: { flaky: i % 5 === 0 } };
  }
  const taskGraphId = slugid.nice();
  const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graphOf(nodes));
  const workflowId = `task-graph/${taskGraphId}`;
  const result = await stack.client.workflow.getHandle(workflowId).result();
  assert.deepEqual(result, { taskGraphId, state: 'finished' });

  const runs = await eventually(async () => {
    const found = [];
    for await (const execution of stack.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) found.push(execution);
    return found.length > 1 && found.every((e) => e.status.name !== 'RUNNING') ? found : undefined;
  }, 'the runs of the graph in visibility');
  const continued = runs.filter((e) => e.status.name === 'CONTINUED_AS_NEW').length;
  assert.ok(continued >= 2, `expected several continue-as-new runs, saw ${continued}`);
  for (const execution of runs) {
    const history = await stack.client.workflow.getHandle(workflowId, execution.runId).fetchHistory();
    assert.ok((history.events?.length ?? 0) < 400, `run ${execution.runId} has ${history.events?.length} events`);
  }
  // Exactly the runs each task should have had: flaky ones twice, the others once.
  for (const { label, taskId } of res.tasks) {
    assert.equal(runsByTask.get(taskId), Number(label.slice(1)) % 5 === 0 ? 2 : 1, label);
  }
  const status = await stack.root.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${taskGraphId}/status`);
  assert.equal(status.status.state, 'finished');
});
