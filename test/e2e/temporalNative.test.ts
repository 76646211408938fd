import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import slugid from 'slugid';
import { WorkflowFailedError } from '@temporalio/client';
import { ApplicationFailure } from '@temporalio/common';
import { eventually } from '../../support/stack.js';
import type { ClaimedTask } from '../../support/fastWorker.js';
import { graphOf } from '../../support/graphs.js';
import { ensureTemporalCli } from '../../src/temporal/devServer.js';
import { startTaskGraph, GraphTooLargeForTemporalError } from '../../src/temporal/startTaskGraph.js';
import { createClient, updateClient } from '../../src/auth/clients.js';
import { ApiClient, TgsApiError } from '../../src/client/http.js';
import { amendGraphUpdate, cancelSignal, INVALID_TASK_GRAPH, rerunSignal, SEARCH_ATTRIBUTES, statusQuery, tasksDefinedSignal, WORKFLOW_TYPE } from '../../src/workflows/contract.js';
import { useStack } from '../helpers/stackFixture.js';

// The Temporal-native contract (docs/temporal.md), driven with the stock `temporal` CLI against a dev server
// that starts WITHOUT tgs's search attributes: the worker must register them itself.
const run = promisify(execFile);
const TEMPORAL_CLIENT = 'tests/temporal-native';
let temporalClient: { clientId: string; accessToken: string };
let cli: string;
const fixed = new Set<string>();
const dir = mkdtempSync(path.join(tmpdir(), 'tgs-native-'));

const stack = useStack({
  beforeStart: () => {
    cli = ensureTemporalCli();
  },
  registerSearchAttributes: false,
  configOverrides: { temporalClientId: TEMPORAL_CLIENT },
  worker: { concurrency: 4, decide: (task: ClaimedTask) => (task.task.payload.broken && !fixed.has(task.taskId) ? 'failed' : 'completed') },
});
stack.onStart(async () => {
  // What graphs started on Temporal act as: tasks of tgs-test only, no task scopes, no routes.
  temporalClient = await createClient(stack.api.db.pool, TEMPORAL_CLIENT, {
    description: 'Temporal-native graphs of this test file',
    expires: new Date(Date.now() + 86_400_000).toISOString(),
    scopes: ['scheduler:create-task-graph', `queue:scheduler-id:${stack.config.schedulerId}`, 'queue:create-task:highest:tgs-test/*'],
    deleteOnExpiration: false,
  });
});

async function temporal(...args: string[]): Promise<string> {
  const { stdout } = await run(cli, [...args, '--address', stack.temporal.address, '--namespace', stack.config.temporalNamespace], { timeout: 30_000 });
  return stdout;
}

async function startNative(graph: unknown, workflowId = `task-graph/${slugid.nice()}`) {
  const file = path.join(dir, `${workflowId.replace(/\W/g, '_')}.json`);
  writeFileSync(file, JSON.stringify(graph));
  await temporal('workflow', 'start', '--type', WORKFLOW_TYPE, '--task-queue', stack.config.temporalTaskQueue, '--workflow-id', workflowId, '--input-file', file);
  return { workflowId, taskGraphId: workflowId.slice('task-graph/'.length) };
}

const queryStatus = async (workflowId: string) =>
  JSON.parse(await temporal('workflow', 'query', '--workflow-id', workflowId, '--name', statusQuery.name, '--output', 'json')).queryResult[0];

const httpState = async (taskGraphId: string) =>
  (await stack.root.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${taskGraphId}/status`)).status.state;

test('a graph started with `temporal workflow start` runs to finished; query and HTTP status answer', async () => {
  const { workflowId, taskGraphId } = await startNative(graphOf({ a: {}, b: { requires: ['a'] }, c: { requires: ['a'] }, d: { requires: ['b', 'c'] } }, 'native'));
  const result = await stack.client.workflow.getHandle(workflowId).result();
  assert.deepEqual(result, { taskGraphId, state: 'finished' });
  const status = await queryStatus(workflowId);
  assert.equal(status.state, 'finished');
  assert.equal(status.taskGraphId, taskGraphId);
  assert.equal(status.routing, 'native');
  assert.equal(status.counts.completed, 4);
  assert.equal(await httpState(taskGraphId), 'finished');
  const tasks = await stack.api.db.pool.query<{ n: string }>('SELECT count(*) AS n FROM tasks WHERE task_group_id = $1', [taskGraphId]);
  assert.equal(Number(tasks.rows[0].n), 4);
});

test('a blocked graph is found by TaskGraphState, and `temporal workflow signal --name rerun` makes it finish', async () => {
  const { workflowId, taskGraphId } = await startNative(graphOf({ broken: { payload: { broken: true } }, after: { requires: ['broken'] } }));
  await eventually(async () => (await queryStatus(workflowId)).state === 'blocked', 'blocked', 60_000);
  const status = await queryStatus(workflowId);
  assert.equal(status.blockedBy.length, 1);
  const brokenId: string = status.blockedBy[0];
  const listed = await eventually(async () => {
    const out = await temporal('workflow', 'list', '--query', `${SEARCH_ATTRIBUTES.state.name}='blocked'`, '--output', 'json');
    return out.includes(workflowId) ? out : undefined;
  }, 'workflow list finds the blocked graph', 30_000);
  assert.match(listed, new RegExp(taskGraphId));

  // A signal naming an unknown label is refused without failing the workflow, and says why.
  await temporal('workflow', 'signal', '--workflow-id', workflowId, '--name', rerunSignal.name, '--input', JSON.stringify({ label: 'nope' }));
  await eventually(async () => (await queryStatus(workflowId)).refused.some((r: string) => r.includes('"nope"')), 'refusal recorded');

  fixed.add(brokenId);
  await temporal('workflow', 'signal', '--workflow-id', workflowId, '--name', rerunSignal.name, '--input', JSON.stringify({ label: 'broken' }));
  const result = await stack.client.workflow.getHandle(workflowId).result();
  assert.equal(result.state, 'finished');
  assert.equal(await httpState(taskGraphId), 'finished');
  await eventually(async () => {
    const out = await temporal('workflow', 'list', '--query', `${SEARCH_ATTRIBUTES.state.name}='finished' AND ${SEARCH_ATTRIBUTES.schedulerId.name}='${stack.config.schedulerId}'`, '--output', 'json');
    return out.includes(workflowId);
  }, 'workflow list finds the finished graph', 30_000);
});

/** `temporal workflow update execute --name amendGraph` with the edited file: the CLI's output, or its error. */
async function amendNative(workflowId: string, file: unknown): Promise<{ ok: boolean; out: string }> {
  const input = path.join(dir, `amend-${slugid.nice()}.json`);
  writeFileSync(input, JSON.stringify(file));
  try {
    return { ok: true, out: await temporal('workflow', 'update', 'execute', '--workflow-id', workflowId, '--name', amendGraphUpdate.name, '--input-file', input, '--output', 'json') };
  } catch (err) {
    return { ok: false, out: `${(err as { stdout?: string }).stdout ?? ''}${(err as { stderr?: string }).stderr ?? ''}` };
  }
}

test('`temporal workflow update execute --name amendGraph` amends a blocked graph as TGS_TEMPORAL_CLIENT_ID: refused without its scope, then the fixed task runs and the graph finishes', async () => {
  const before = graphOf({ broken: { payload: { broken: true } }, after: { requires: ['broken'] }, other: {} });
  const { workflowId, taskGraphId } = await startNative(before);
  await eventually(async () => (await queryStatus(workflowId)).state === 'blocked', 'blocked', 60_000);
  const edited = graphOf({ broken: { payload: { broken: false } }, after: { requires: ['broken'] }, other: {} });

  // the Temporal client may create graphs but not amend them: refused with the scope it lacks, nothing written
  let res = await amendNative(workflowId, edited);
  assert.equal(res.ok, false);
  assert.match(res.out, new RegExp(`scheduler:amend-task-graph:${taskGraphId}`));
  const amends = async () => (await stack.api.db.pool.query('SELECT 1 FROM graph_amends WHERE task_graph_id = $1', [taskGraphId])).rowCount;
  assert.equal(await amends(), 0);

  await updateClient(stack.api.db.pool, TEMPORAL_CLIENT, {
    description: 'Temporal-native graphs of this test file, which it may amend',
    expires: new Date(Date.now() + 86_400_000).toISOString(),
    deleteOnExpiration: false,
    scopes: ['scheduler:create-task-graph', 'scheduler:amend-task-graph:*', `queue:scheduler-id:${stack.config.schedulerId}`, 'queue:create-task:highest:tgs-test/*'],
  });
  // an invalid file: the endpoint's 400 message, naming the label
  res = await amendNative(workflowId, graphOf({ broken: {}, after: { requires: ['brokne'] } }));
  assert.equal(res.ok, false);
  assert.match(res.out, /after: requires unknown label \\?"brokne\\?"/);
  assert.equal(await amends(), 0);

  res = await amendNative(workflowId, edited);
  assert.equal(res.ok, true, res.out);
  const answer = JSON.parse(res.out).result ?? JSON.parse(res.out);
  assert.deepEqual(answer.classification.changed, ['broken']);
  assert.deepEqual(answer.classification.dependent, ['after']);
  assert.equal(answer.superseded, 2);
  const result = await stack.client.workflow.getHandle(workflowId).result();
  assert.equal(result.state, 'finished');
  const { rows } = await stack.api.db.pool.query<{ who: string }>('SELECT who FROM graph_amends WHERE task_graph_id = $1', [taskGraphId]);
  assert.deepEqual(rows.map((r) => r.who), [`temporal:${TEMPORAL_CLIENT}`]);
});

async function expectInvalid(workflowId: string, pattern: RegExp) {
  const err = await stack.client.workflow.getHandle(workflowId).result().then(
    () => assert.fail('the workflow should have failed'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof WorkflowFailedError, String(err));
  const cause = err.cause;
  assert.ok(cause instanceof ApplicationFailure, String(cause));
  assert.equal(cause.type, INVALID_TASK_GRAPH);
  assert.equal(cause.nonRetryable, true);
  assert.match(cause.message, pattern);
}

test('an invalid graph started natively fails with InvalidTaskGraph naming every offending label, and creates no task', async () => {
  const graph = graphOf({ x: { requires: ['y'] }, y: { requires: ['x'] }, lonely: { requires: ['ghost'] } });
  const { workflowId, taskGraphId } = await startNative(graph);
  await expectInvalid(workflowId, /x[\s\S]*y|y[\s\S]*x/);
  await expectInvalid(workflowId, /lonely/);
  const rows = await stack.api.db.pool.query('SELECT 1 FROM tasks WHERE task_group_id = $1', [taskGraphId]);
  assert.equal(rows.rowCount, 0);
  const graphs = await stack.api.db.pool.query('SELECT 1 FROM task_graphs WHERE task_graph_id = $1', [taskGraphId]);
  assert.equal(graphs.rowCount, 0);
});

test('a workflow id that is not task-graph/<slugid> fails with InvalidTaskGraph', async () => {
  const { workflowId } = await startNative(graphOf({ a: {} }), 'my-graph');
  await expectInvalid(workflowId, /task-graph\/<slugid>/);
});

test('startTaskGraph (the @temporalio/client way) runs a graph, and refuses input over the payload limit pointing to the HTTP API', async () => {
  const { taskGraphId, handle } = await startTaskGraph(stack.client, graphOf({ one: {}, two: { requires: ['one'] } }), {
    taskQueue: stack.config.temporalTaskQueue,
  });
  assert.deepEqual(await handle.result(), { taskGraphId, state: 'finished' });
  const huge = graphOf({ big: { payload: { blob: 'x'.repeat(2.5 * 1024 * 1024) } } });
  await assert.rejects(startTaskGraph(stack.client, huge), (err: Error) => {
    assert.ok(err instanceof GraphTooLargeForTemporalError);
    assert.match(err.message, /PUT \/api\/scheduler\/v1\/task-graph\//);
    return true;
  });
});

/** Rows that mention the graph, in every table a graph or its tasks write. */
async function footprint(taskGraphId: string) {
  const { rows } = await stack.api.db.pool.query<{ n: number }>(
    `SELECT (SELECT count(*) FROM tasks WHERE task_group_id = $1)::int + (SELECT count(*) FROM task_groups WHERE task_group_id = $1)::int
          + (SELECT count(*) FROM task_graphs WHERE task_graph_id = $1)::int + (SELECT count(*) FROM graph_nodes WHERE task_graph_id = $1)::int AS n`,
    [taskGraphId],
  );
  return rows[0].n;
}

test('a graph beyond TGS_TEMPORAL_CLIENT_ID\'s scopes fails with InvalidTaskGraph naming the missing scopes, exactly as PUT refuses that client, and writes nothing', async () => {
  const graph = graphOf({ ok: {}, greedy: { requires: ['ok'] } });
  const greedy = graph.tasks.greedy.task as Record<string, unknown>;
  greedy.scopes = ['secrets:get:production'];
  greedy.routes = ['index.private'];
  const { workflowId, taskGraphId } = await startNative(graph);
  await expectInvalid(workflowId, /tests\/temporal-native lacks scopes: .*secrets:get:production.*queue:route:index\.private/);
  assert.equal(await footprint(taskGraphId), 0, 'no task, group, graph or node row');
  // The HTTP path, for the same client and graph, names the same missing scopes: one check for both.
  const http = new ApiClient(stack.api.rootUrl, temporalClient);
  const refusal = await http.request('scheduler', 'PUT', `/task-graph/${slugid.nice()}`, graph).then(
    () => assert.fail('PUT should be refused'),
    (e: unknown) => e as TgsApiError,
  );
  assert.equal(refusal.code, 'InsufficientScopes');
  const cause = (await stack.client.workflow.getHandle(workflowId).result().catch((e: WorkflowFailedError) => e.cause)) as ApplicationFailure;
  assert.equal(cause.message.split('lacks scopes: ')[1], refusal.message.split('lacks scopes: ')[1]);

  // Another provisioner is beyond it too.
  const elsewhere = graphOf({ a: {} });
  (elsewhere.tasks.a.task as Record<string, unknown>).provisionerId = 'someone-else';
  const other = await startNative(elsewhere);
  await expectInvalid(other.workflowId, /lacks scopes: any of \(queue:create-task:highest:someone-else\/fast/);
  assert.equal(await footprint(other.taskGraphId), 0);
});

test('without TGS_TEMPORAL_CLIENT_ID, a graph started on Temporal is refused with a message saying to set it', async () => {
  stack.config.temporalClientId = '';
  try {
    const { workflowId, taskGraphId } = await startNative(graphOf({ a: {} }));
    await expectInvalid(workflowId, /set TGS_TEMPORAL_CLIENT_ID/);
    assert.equal(await footprint(taskGraphId), 0);
  } finally {
    stack.config.temporalClientId = TEMPORAL_CLIENT;
  }
});

test('starting taskGraph again for a stored graph that finished (or with forged carried state) fails and changes nothing', async () => {
  const taskGraphId = slugid.nice();
  await stack.root.request('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graphOf({ a: {} }));
  await stack.client.workflow.getHandle(`task-graph/${taskGraphId}`).result();
  const before = await stack.api.db.pool.query('SELECT state, updated FROM task_graphs WHERE task_graph_id = $1', [taskGraphId]);
  for (const input of [{ taskGraphId }, { taskGraphId, origin: 'queue' }]) {
    const file = path.join(dir, `again-${input.origin ?? 'graph'}.json`);
    writeFileSync(file, JSON.stringify(input));
    await temporal('workflow', 'start', '--type', WORKFLOW_TYPE, '--task-queue', stack.config.temporalTaskQueue, '--workflow-id', `task-graph/${taskGraphId}`, '--input-file', file);
    await expectInvalid(`task-graph/${taskGraphId}`, /is finished; its workflow is not started again/);
  }
  const after = await stack.api.db.pool.query('SELECT state, updated FROM task_graphs WHERE task_graph_id = $1', [taskGraphId]);
  assert.deepEqual(after.rows, before.rows, 'the graph row was not touched (every graph event updates it)');

  const forged = await startNative({ taskGraphId: undefined, carried: { nodeCount: 0, states: '', rerunsLeft: '', lastRun: '', reset: '', manualReruns: [], canceled: false, publishedState: null, messageSeq: {}, runs: 1, rejected: [] } });
  await expectInvalid(forged.workflowId, /carried state is accepted only from the workflow's own continue-as-new/);
});

test('TGS_TEMPORAL_CLIENT_ID disabled refuses Temporal-native graphs; its scopes are expanded through roles as over HTTP', async () => {
  const http = new ApiClient(stack.api.rootUrl, stack.api.root);
  const client = encodeURIComponent(TEMPORAL_CLIENT);
  await http.request('auth', 'POST', `/clients/${client}/disable`);
  try {
    const { workflowId, taskGraphId } = await startNative(graphOf({ a: {} }));
    await expectInvalid(workflowId, /tests\/temporal-native \(TGS_TEMPORAL_CLIENT_ID\) is disabled/);
    assert.equal(await footprint(taskGraphId), 0);
  } finally {
    await http.request('auth', 'POST', `/clients/${client}/enable`);
  }
  // A scope the client holds only through a role it assumes counts, as it does for an HTTP request.
  const roleId = `temporal-native-extra-${slugid.nice()}`;
  await http.request('auth', 'PUT', `/roles/${roleId}`, { description: 'what the Temporal client assumes', scopes: ['queue:route:index.native.*'] });
  const graph = graphOf({ routed: {} });
  (graph.tasks.routed.task as Record<string, unknown>).routes = ['index.native.routed'];
  const without = await startNative(graph);
  await expectInvalid(without.workflowId, /lacks scopes: .*queue:route:index\.native\.routed/);
  const { rows } = await stack.api.db.pool.query<{ scopes: string[] }>('SELECT scopes FROM clients WHERE client_id = $1', [TEMPORAL_CLIENT]);
  await stack.api.db.pool.query('UPDATE clients SET scopes = $2 WHERE client_id = $1', [TEMPORAL_CLIENT, [...rows[0].scopes, `assume:${roleId}`]]);
  try {
    const { workflowId, taskGraphId } = await startNative(graph);
    assert.deepEqual(await stack.client.workflow.getHandle(workflowId).result(), { taskGraphId, state: 'finished' });
  } finally {
    await stack.api.db.pool.query('UPDATE clients SET scopes = $2 WHERE client_id = $1', [TEMPORAL_CLIENT, rows[0].scopes]);
  }
});

test('a workflow started on Temporal with origin "queue" cannot take over a plain task group: refused, its tasks untouched', async () => {
  // a plain queue task (no dependencies): nobody claims its worker type, so it stays pending
  const taskId = slugid.nice();
  const task = { ...graphOf({ plain: {} }).tasks.plain.task, workerType: 'nobody-claims' };
  await stack.root.request('queue', 'PUT', `/task/${taskId}`, task);
  const handle = await stack.client.workflow.signalWithStart(WORKFLOW_TYPE, {
    workflowId: `task-graph/${taskId}`,
    taskQueue: stack.config.temporalTaskQueue,
    args: [{ taskGraphId: taskId, origin: 'queue' }],
    signal: tasksDefinedSignal,
    signalArgs: [{ taskIds: [taskId] }],
  });
  await handle.signal(cancelSignal, { reason: 'hostile' }).catch(() => undefined);
  await expectInvalid(`task-graph/${taskId}`, /has no task with queue-level dependencies, so it is no task-graph/);
  const status = await stack.root.request<{ status: { state: string } }>('queue', 'GET', `/task/${taskId}/status`);
  assert.equal(status.status.state, 'pending', 'the task was not canceled');
  assert.equal((await stack.api.db.pool.query('SELECT 1 FROM task_graphs WHERE task_graph_id = $1', [taskId])).rowCount, 0, 'no graph row');
});
