import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { eventually } from '../../support/stack.js';
import { startFastWorker } from '../../support/fastWorker.js';
import { fastTask, graphOf } from '../../support/graphs.js';
import { createClient } from '../../src/auth/clients.js';
import { createActivities } from '../../src/activities/index.js';
import { ApiClient, TgsApiError } from '../../src/client/http.js';
import { resolutionsSignal, statusQuery, taskQuery, workflowIdFor } from '../../src/workflows/contract.js';
import { useStack } from '../helpers/stackFixture.js';

// Graphs belong to their submitter: the queue's createTask cannot add to (or reopen) someone else's graph, and
// whoever can signal a graph's workflow cannot make it start a task the queue's stored state does not allow.
const stack = useStack({ worker: true });

async function clientWith(clientId: string, scopes: string[]): Promise<ApiClient> {
  const created = await createClient(stack.api.db.pool, clientId, {
    description: `test client ${clientId}`,
    expires: new Date(Date.now() + 86_400_000).toISOString(),
    scopes,
    deleteOnExpiration: false,
  });
  return new ApiClient(stack.api.rootUrl, { clientId, accessToken: created.accessToken });
}

async function submit(graph: unknown): Promise<{ taskGraphId: string; ids: Map<string, string> }> {
  const taskGraphId = slugid.nice();
  const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graph);
  return { taskGraphId, ids: new Map(res.tasks.map((t) => [t.label, t.taskId])) };
}

/** A task that no worker of this file takes: it keeps its graph running. */
const held = (name: string, workerType = 'hold') => ({ ...fastTask(name), provisionerId: 'tgs-hold', workerType });

const graphRow = async (taskGraphId: string) =>
  (await stack.api.db.pool.query<{ state: string; node_count: number; task_count: number; updated: Date }>(
    'SELECT state, node_count, task_count, updated FROM task_graphs WHERE task_graph_id = $1',
    [taskGraphId],
  )).rows[0];
const taskExists = async (taskId: string) => ((await stack.api.db.pool.query('SELECT 1 FROM tasks WHERE task_id = $1', [taskId])).rowCount ?? 0) > 0;
const refusal = (call: Promise<unknown>) => call.then(() => assert.fail('the request should be refused'), (e: unknown) => e as TgsApiError);
const workflow = (taskGraphId: string) => stack.client.workflow.getHandle(workflowIdFor(taskGraphId));

test('createTask into a task-graph\'s group needs scheduler:extend-task-graph:<id> (403 before anything is written); with it the task joins the graph and runs; extendTaskGraph still works', async () => {
  const { taskGraphId } = await submit({ routing: 'own', tasks: { hold: { requires: [], task: held('hold') } } });
  const createScopes = [`queue:scheduler-id:${stack.config.schedulerId}`, 'queue:create-task:highest:tgs-test/*'];
  const stranger = await clientWith('tests/stranger', createScopes);
  const owner = await clientWith('tests/owner', [...createScopes, `scheduler:extend-task-graph:${taskGraphId}`]);
  const before = await graphRow(taskGraphId);
  const intruder = slugid.nice();
  const task = { ...fastTask('intruder'), taskGroupId: taskGraphId, schedulerId: stack.config.schedulerId };

  const err = await refusal(stranger.request('queue', 'PUT', `/task/${intruder}`, task));
  assert.equal(err.status, 403);
  assert.equal(err.code, 'InsufficientScopes');
  assert.match(err.message, new RegExp(`lacks scopes: scheduler:extend-task-graph:${taskGraphId} \\(task group ${taskGraphId} is a task-graph`));
  assert.equal(await taskExists(intruder), false, 'no task row');
  assert.deepEqual(await graphRow(taskGraphId), before, 'graph row (node and task counts) untouched');
  const nodes = await stack.api.db.pool.query('SELECT 1 FROM graph_nodes WHERE task_graph_id = $1', [taskGraphId]);
  assert.equal(nodes.rowCount, 1, 'no graph node');

  // The owner's createTask joins the graph in the same transaction, and the workflow runs it.
  const joined = slugid.nice();
  await owner.request('queue', 'PUT', `/task/${joined}`, { ...task, metadata: { ...task.metadata, name: 'joined' } });
  const member = await stack.api.db.pool.query('SELECT member, label FROM graph_nodes WHERE task_graph_id = $1 AND task_id = $2', [taskGraphId, joined]);
  assert.deepEqual(member.rows, [{ member: true, label: joined }]);
  await eventually(async () => {
    const node = await workflow(taskGraphId).query(taskQuery, { taskId: joined }).catch(() => undefined);
    return node?.state === 'completed';
  }, 'the workflow to see the joined task completed');

  const extended = await owner.request<{ tasks: { label: string }[] }>('scheduler', 'POST', `/task-graph/${taskGraphId}/extend`, {
    tasks: { more: { requires: [], task: fastTask('more') } },
  });
  assert.deepEqual(extended.tasks.map((t) => t.label), ['more']);
  assert.equal((await graphRow(taskGraphId)).task_count, 3);
  await stack.root.request('scheduler', 'POST', `/task-graph/${taskGraphId}/cancel`);
});

test('a graph that declares its scopes holds only tasks those cover, however they join: create, extend, createTask into its group', async () => {
  const graph = { ...graphOf({ gate: {} }), scopes: ['secrets:get:project/a/*'] };
  graph.tasks.gate.task = held('gate');
  (graph.tasks.gate.task as Record<string, unknown>).scopes = ['secrets:get:project/a/token'];
  const { taskGraphId } = await submit(graph);
  const before = await graphRow(taskGraphId);
  const over = { ...held('over'), scopes: ['secrets:get:project/b/token'] };
  const extend = await refusal(stack.root.request('scheduler', 'POST', `/task-graph/${taskGraphId}/extend`, { tasks: { over: { task: over } } }));
  assert.equal(extend.status, 400);
  assert.match(extend.message, /tasks use scopes the graph does not declare: over/);
  const taskId = slugid.nice();
  const created = await refusal(stack.root.request('queue', 'PUT', `/task/${taskId}`, { ...over, taskGroupId: taskGraphId, schedulerId: stack.config.schedulerId }));
  assert.equal(created.status, 400);
  assert.match(created.message, /uses scopes task-graph .* does not declare: secrets:get:project\/b\/token/);
  assert.equal(await taskExists(taskId), false);
  assert.deepEqual(await graphRow(taskGraphId), before, 'the graph row is unchanged');
  // within the declared scopes both ways work
  const within = { ...held('within'), scopes: ['secrets:get:project/a/other'] };
  await stack.root.request('scheduler', 'POST', `/task-graph/${taskGraphId}/extend`, { tasks: { within: { task: within } } });
  await stack.root.request('queue', 'PUT', `/task/${slugid.nice()}`, { ...within, taskGroupId: taskGraphId, schedulerId: stack.config.schedulerId });
  assert.equal((await graphRow(taskGraphId)).task_count, 3);
  await stack.root.request('scheduler', 'POST', `/task-graph/${taskGraphId}/cancel`);
});

test('a finished task-graph is not reopened by createTask: 409 RequestConflict, nothing written; repeating an existing task still answers', async () => {
  const { taskGraphId, ids } = await submit(graphOf({ only: {} }));
  await workflow(taskGraphId).result();
  const before = await graphRow(taskGraphId);
  assert.equal(before.state, 'finished');
  const late = slugid.nice();
  const err = await refusal(stack.root.request('queue', 'PUT', `/task/${late}`, { ...fastTask('late'), taskGroupId: taskGraphId, schedulerId: stack.config.schedulerId }));
  assert.equal(err.status, 409);
  assert.equal(err.code, 'RequestConflict');
  assert.match(err.message, /task-graph .* is finished: its task group takes no new tasks/);
  assert.equal(await taskExists(late), false);
  assert.deepEqual(await graphRow(taskGraphId), before);

  const only = ids.get('only') as string;
  const definition = await stack.root.request('queue', 'GET', `/task/${only}`);
  const again = await stack.root.request<{ status: { state: string } }>('queue', 'PUT', `/task/${only}`, definition);
  assert.equal(again.status.state, 'completed');
});

test('a task-graph cannot take over an existing task group: 409, nothing written', async () => {
  const groupId = slugid.nice();
  const taskId = slugid.nice();
  await stack.root.request('queue', 'PUT', `/task/${taskId}`, { ...held('plain'), taskGroupId: groupId, schedulerId: stack.config.schedulerId });
  const err = await refusal(stack.root.request('scheduler', 'PUT', `/task-graph/${groupId}`, graphOf({ a: {} })));
  assert.equal(err.status, 409);
  assert.match(err.message, /task group .* exists already/);
  assert.equal(await graphRow(groupId), undefined);
  const tasks = await stack.api.db.pool.query('SELECT task_id FROM tasks WHERE task_group_id = $1', [groupId]);
  assert.deepEqual(tasks.rows, [{ task_id: taskId }]);
});

test('a forged `resolutions` signal does not schedule a dependent: the dispatch activity checks the queue, and the real completion still does', async () => {
  const { taskGraphId, ids } = await submit({
    routing: 'forged',
    tasks: { gate: { requires: [], task: held('gate', 'gate') }, after: { requires: ['gate'], task: fastTask('after') } },
  });
  const gate = ids.get('gate') as string;
  const dependent = ids.get('after') as string;
  await eventually(async () => (await stack.root.request<{ status: { state: string } }>('queue', 'GET', `/task/${gate}/status`)).status.state === 'pending', 'gate pending');
  await workflow(taskGraphId).signal(resolutionsSignal, [{ taskId: gate, runId: 0, state: 'completed' }]);
  const status = await eventually(async () => {
    const s = await workflow(taskGraphId).query(statusQuery);
    return s.refused.some((r) => r.includes(dependent)) ? s : undefined;
  }, 'the refused dispatch to show in status');
  assert.match(status.refused.find((r) => r.includes(dependent)) as string, /not dispatched: the queue does not show its dependencies resolved/);
  const row = await stack.api.db.pool.query<{ state: string; runs: unknown[] }>('SELECT state, runs FROM tasks WHERE task_id = $1', [dependent]);
  assert.deepEqual(row.rows[0], { state: 'unscheduled', runs: [] });

  // The gate really completes: the dependent is scheduled (by the next news the workflow hears) and runs.
  const gateWorker = startFastWorker({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-hold', workerType: 'gate' });
  try {
    assert.deepEqual(await workflow(taskGraphId).result(), { taskGraphId, state: 'finished' });
  } finally {
    await gateWorker.stop();
  }
});

test('activities act only on the graph\'s own members, whatever input they are scheduled with', async () => {
  const mine = await submit({ routing: 'mine', tasks: { hold: { requires: [], task: held('mine') } } });
  const theirs = await submit({ routing: 'theirs', tasks: { hold: { requires: [], task: held('theirs') }, next: { requires: ['hold'], task: fastTask('next') } } });
  const victim = theirs.ids.get('hold') as string;
  const next = theirs.ids.get('next') as string;
  await eventually(async () => (await stack.root.request<{ status: { state: string } }>('queue', 'GET', `/task/${victim}/status`)).status.state === 'pending', 'their root pending');
  const activities = createActivities({ config: stack.config, pool: stack.api.db.pool });
  const result = await activities.dispatchTasks(mine.taskGraphId, [{ idx: 0, taskId: next, kind: 'schedule' }]);
  assert.deepEqual(result.unready, [next]);
  await activities.cancelTasks(mine.taskGraphId, [victim]);
  const states = await stack.api.db.pool.query<{ task_id: string; state: string }>('SELECT task_id, state FROM tasks WHERE task_id = ANY($1) ORDER BY task_id', [[victim, next]]);
  assert.deepEqual(Object.fromEntries(states.rows.map((r) => [r.task_id, r.state])), { [victim]: 'pending', [next]: 'unscheduled' });
  for (const g of [mine, theirs]) await stack.root.request('scheduler', 'POST', `/task-graph/${g.taskGraphId}/cancel`);

  // An automatic rerun answers a failure: told a completed task failed, the activity refuses and says what the queue has.
  const done = await submit(graphOf({ ok: {} }));
  await workflow(done.taskGraphId).result();
  const ok = done.ids.get('ok') as string;
  const rerun = await activities.dispatchTasks(done.taskGraphId, [{ idx: 0, taskId: ok, kind: 'rerun', expectedRunId: 0, rerunsLeft: 1 }]);
  assert.deepEqual(rerun.refused?.map((r) => [r.taskId, r.state]), [[ok, 'completed']]);
  const runs = await stack.api.db.pool.query<{ n: number }>('SELECT jsonb_array_length(runs) AS n FROM tasks WHERE task_id = $1', [ok]);
  assert.equal(runs.rows[0].n, 1, 'no run added');
});
