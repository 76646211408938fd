import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
// The official client, current major, unmodified: what Mozilla's taskgraph (through the Python client) and today's
// JavaScript tools call.
import taskcluster from 'taskcluster-client';
import { useStack } from '../helpers/stackFixture.js';
import { fastTask } from '../../support/graphs.js';

// A decision task as taskgraph runs one (taskcluster/taskgraph: `create_tasks`, `find_task_id_batched`,
// `status_task_batched`), through the JavaScript client's calls of the same entries:
// - generation 1: a decision task is claimed; with its run's credentials it creates the graph's tasks one
//   createTask call each (taskGroupId = the decision's taskId, each depending on the decision task, the cacheable
//   one indexed by a route), and completes; the worker runs them; the relay indexes the cacheable one;
// - generation 2: the next decision looks its cacheable tasks up in one `index.findTasksAtIndex` call (an index
//   path never written is simply absent), checks the found tasks' states in one `queue.statuses` call and reads
//   their definitions with `queue.tasks`, then creates only what was not found, depending on the found task of the
//   earlier group, and that task runs.
const stack = useStack({ worker: true });

const DECISION_QUEUE = 'tgs-test/decision';

async function runDecision(rootUrl: string, root: { clientId: string; accessToken: string }, project: string, decide: (queue: any, index: any, decisionId: string) => Promise<string[]>) {
  const rootQueue = new taskcluster.Queue({ rootUrl, credentials: root, retries: 0 });
  const decisionId = slugid.nice();
  await rootQueue.createTask(decisionId, {
    ...fastTask(`decision ${project}`),
    workerType: 'decision',
    taskGroupId: decisionId,
    scopes: [
      'queue:create-task:lowest:tgs-test/fast',
      'queue:scheduler-id:-',
      `queue:route:index.${project}.*`,
      'queue:get-task:*',
      'queue:status:*',
      `index:find-task:${project}.*`,
    ],
  });
  const claim = await rootQueue.claimWork(DECISION_QUEUE, { workerGroup: 'decision', workerId: 'decision-1', tasks: 1 });
  assert.equal(claim.tasks.length, 1);
  assert.equal(claim.tasks[0].status.taskId, decisionId);
  // the decision acts with its run's temporary credentials (what taskcluster-proxy gives a decision task)
  const queue = new taskcluster.Queue({ rootUrl, credentials: claim.tasks[0].credentials, retries: 0 });
  const index = new taskcluster.Index({ rootUrl, credentials: claim.tasks[0].credentials, retries: 0 });
  const created = await decide(queue, index, decisionId);
  await queue.reportCompleted(decisionId, 0);
  return { decisionId, created };
}

async function untilResolved(queue: any, taskIds: string[], timeoutMs = 30_000): Promise<Map<string, string>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const { statuses } = await queue.statuses({ taskIds });
    const states = new Map<string, string>(statuses.map((s: { taskId: string; status: { state: string } }) => [s.taskId, s.status.state]));
    if ([...states.values()].every((s) => s === 'completed' || s === 'failed' || s === 'exception') && states.size === taskIds.length) return states;
    if (Date.now() > deadline) throw new Error(`not resolved in time: ${JSON.stringify([...states])}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

test('a taskgraph-style decision: tasks created one call each; the next generation finds cached tasks in one findTasksAtIndex and checks them in one statuses call', async () => {
  const { rootUrl } = stack.api;
  const root = stack.api.root;
  const project = `proj${slugid.nice().replace(/[^a-zA-Z0-9]/g, '').slice(0, 8)}`;
  const rootQueue = new taskcluster.Queue({ rootUrl, credentials: root, retries: 0 });
  const rootIndex = new taskcluster.Index({ rootUrl, credentials: root, retries: 0 });

  // --- generation 1
  const first = await runDecision(rootUrl, root, project, async (queue, _index, decisionId) => {
    const toolchain = slugid.nice();
    const build = slugid.nice();
    const test1 = slugid.nice();
    const task = (name: string, dependencies: string[], routes: string[] = []) => ({
      ...fastTask(name),
      taskGroupId: decisionId,
      dependencies: [decisionId, ...dependencies],
      routes,
    });
    await queue.createTask(toolchain, task('toolchain', [], [`index.${project}.cache.toolchain.v1`]));
    await queue.createTask(build, task('build', [toolchain]));
    await queue.createTask(test1, task('test', [build]));
    return [toolchain, build, test1];
  });
  const states = await untilResolved(rootQueue, first.created);
  assert.deepEqual([...states.values()], ['completed', 'completed', 'completed']);
  const [toolchain] = first.created;

  // the relay indexes the completed task of the route
  const deadline = Date.now() + 15_000;
  while ((await rootIndex.findTask(`${project}.cache.toolchain.v1`).catch(() => undefined))?.taskId !== toolchain) {
    assert.ok(Date.now() < deadline, 'the toolchain task was indexed');
    await new Promise((r) => setTimeout(r, 100));
  }

  // --- generation 2
  let lookedUp: { tasks: { namespace: string; taskId: string }[] } | undefined;
  let checked: { statuses: { taskId: string; status: { state: string } }[] } | undefined;
  let definitions: { tasks: { taskId: string; task: { metadata: { name: string } } }[] } | undefined;
  const second = await runDecision(rootUrl, root, project, async (queue, index, decisionId) => {
    const paths = [`${project}.cache.toolchain.v1`, `${project}.cache.never-built.v1`];
    lookedUp = await index.findTasksAtIndex({ indexes: paths });
    const found = new Map(lookedUp!.tasks.map((t) => [t.namespace, t.taskId]));
    checked = await queue.statuses({ taskIds: [...found.values()] });
    definitions = await queue.tasks({ taskIds: [...found.values()] });
    const reused = found.get(paths[0]);
    assert.ok(reused, 'the cached toolchain was found');
    const build = slugid.nice();
    await queue.createTask(build, { ...fastTask('build again'), taskGroupId: decisionId, dependencies: [decisionId, reused] });
    return [build];
  });
  assert.deepEqual(lookedUp!.tasks.map((t) => [t.namespace, t.taskId]), [[`${project}.cache.toolchain.v1`, toolchain]]);
  assert.deepEqual(checked!.statuses.map((s) => [s.taskId, s.status.state]), [[toolchain, 'completed']]);
  assert.deepEqual(definitions!.tasks.map((t) => [t.taskId, t.task.metadata.name]), [[toolchain, 'toolchain']]);
  assert.deepEqual([...(await untilResolved(rootQueue, second.created)).values()], ['completed']);
  // nothing of the first generation ran again
  const again = await rootQueue.statuses({ taskIds: first.created });
  assert.deepEqual(again.statuses.map((s: { status: { runs: unknown[] } }) => s.status.runs.length), [1, 1, 1]);
});
