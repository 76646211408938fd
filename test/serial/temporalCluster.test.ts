import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import pg from 'pg';
import slugid from 'slugid';
import { startStack, eventually, type Stack } from '../../support/stack.js';
import { startFastWorker, type ClaimedTask } from '../../support/fastWorker.js';
import { graphOf } from '../../support/graphs.js';
import { startTemporalCluster, type ClusterService, type TemporalCluster } from '../../support/temporalCluster.js';
import { Client } from '@temporalio/client';
import { ensureTemporalCli } from '../../src/temporal/devServer.js';
import { ensureSearchAttributes } from '../../src/temporal/searchAttributes.js';
import { rerunSignal, SEARCH_ATTRIBUTES, statusQuery } from '../../src/workflows/contract.js';

// tgs on Temporal as platform teams run it: frontend, history, matching and worker as four processes on Postgres
// (support/temporalCluster.ts), not the dev server every other test uses. One cluster for the file (it takes about
// 10 s to set up); the faults run in sequence on one graph.
const run = promisify(execFile);
const say = (line: string) => console.log(`# ${line}`);
let cluster: TemporalCluster;
let stack: Stack;
let worker: ReturnType<typeof startFastWorker>;
let cli: string;
const fixed = new Set<string>();

before(async () => {
  cli = ensureTemporalCli();
  cluster = await startTemporalCluster({ shards: 4, log: (line) => say(`cluster: ${line}`) });
  // the cluster's namespace has none of tgs's search attributes: the scheduler worker registers them
  stack = await startStack({ temporalAddress: cluster.address });
  worker = startFastWorker({
    rootUrl: stack.api.rootUrl,
    credentials: stack.api.root,
    provisionerId: 'tgs-test',
    workerType: 'fast',
    concurrency: 4,
    decide: (task: ClaimedTask) => (task.task.payload.broken && !fixed.has(task.taskId) ? 'failed' : 'completed'),
  });
});
after(async () => {
  await worker?.stop();
  await stack?.stop();
  await cluster?.stop({ dropDatabases: true });
});

async function temporal(...args: string[]): Promise<string> {
  const { stdout } = await run(cli, [...args, '--address', cluster.address, '--namespace', stack.config.temporalNamespace], { timeout: 30_000 });
  return stdout;
}

async function submit(graph: ReturnType<typeof graphOf>) {
  const taskGraphId = slugid.nice();
  const res = await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${taskGraphId}`, graph);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const taskId = (label: string) => (res.body.tasks as { label: string; taskId: string }[]).find((t) => t.label === label)?.taskId as string;
  return { taskGraphId, workflowId: `task-graph/${taskGraphId}`, taskId };
}
const graphState = async (taskGraphId: string) => (await stack.api.request('GET', `/api/scheduler/v1/task-graph/${taskGraphId}/status`)).body.status.state as string;
const taskState = async (taskId: string) => (await stack.api.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status.state as string;
const queryStatus = async (workflowId: string) =>
  JSON.parse(await temporal('workflow', 'query', '--workflow-id', workflowId, '--name', statusQuery.name, '--output', 'json')).queryResult[0];

test('the cluster runs frontend, history, matching and worker as four processes', () => {
  const pids = Object.values(cluster.processes).map((p) => p.pid);
  assert.equal(new Set(pids).size, 4, `four processes: ${JSON.stringify(cluster.processes)}`);
  for (const pid of pids) assert.doesNotThrow(() => process.kill(pid, 0), `process ${pid} runs`);
});

// The first graph is submitted as soon as the scheduler worker has registered the search attributes: on SQL
// visibility the server applies them through its namespace cache, and a start naming them was refused until then.
test('a graph submitted over HTTP finishes; the stock CLI lists it by TaskGraphState and queries its status', async () => {
  const { taskGraphId, workflowId } = await submit(graphOf({ a: {}, b: { requires: ['a'] }, c: { requires: ['a'] }, d: { requires: ['b', 'c'] } }));
  assert.deepEqual(await stack.client.workflow.getHandle(workflowId).result(), { taskGraphId, state: 'finished' });
  assert.equal(await graphState(taskGraphId), 'finished');
  const status = await queryStatus(workflowId);
  assert.equal(status.state, 'finished');
  assert.equal(status.counts.completed, 4);
  // the workflow lives in the cluster's Postgres database, on one of its history shards
  const db = new pg.Client({ host: '127.0.0.1', port: 5432, user: 'postgres', database: cluster.databases.main });
  await db.connect();
  const rows = await db.query<{ shard_id: number }>('SELECT shard_id FROM current_executions WHERE workflow_id = $1', [workflowId]).finally(() => db.end());
  assert.equal(rows.rowCount, 1, `${workflowId} in ${cluster.databases.main}.current_executions`);
  assert.ok(rows.rows[0].shard_id >= 1 && rows.rows[0].shard_id <= 4, `shard ${rows.rows[0].shard_id} of 4`);
  await eventually(async () => {
    const out = await temporal('workflow', 'list', '--query', `${SEARCH_ATTRIBUTES.state.name}='finished'`, '--output', 'json');
    return out.includes(workflowId);
  }, '`temporal workflow list` finds the finished graph on SQL visibility', 30_000);
});

test('the scheduler worker registered tgs search attributes on the cluster SQL visibility store', async () => {
  const listed = JSON.parse(await temporal('operator', 'search-attribute', 'list', '--output', 'json'));
  const custom = Object.keys(listed.customAttributes ?? {});
  for (const key of Object.values(SEARCH_ATTRIBUTES)) assert.ok(custom.includes(key.name), `${key.name} among ${custom.join(', ')}`);
});

test('on a namespace without them, ensureSearchAttributes returns once the server accepts a start naming them', async () => {
  const namespace = `tgs-fresh-${slugid.nice().slice(0, 8).toLowerCase()}`;
  await run(cli, ['operator', 'namespace', 'create', '--namespace', namespace, '--retention', '24h', '--address', cluster.address], { timeout: 30_000 });
  await eventually(async () => {
    await stack.client.connection.operatorService.listSearchAttributes({ namespace });
    return true;
  }, `namespace ${namespace} known to the frontend`);
  await ensureSearchAttributes({ ...stack.config, temporalNamespace: namespace });
  const fresh = new Client({ connection: stack.client.connection, namespace });
  const handle = await fresh.workflow.start('nothing', {
    taskQueue: 'nobody-polls-this',
    workflowId: `sa-${slugid.nice()}`,
    searchAttributes: { [SEARCH_ATTRIBUTES.state.name]: ['running'] },
  });
  await handle.terminate('the test only needed it started');
});

test('a blocked graph is listed as blocked, and `temporal workflow signal --name rerun` makes it finish', async () => {
  const { taskGraphId, workflowId, taskId } = await submit(graphOf({ broken: { payload: { broken: true } }, after: { requires: ['broken'] } }));
  await eventually(async () => (await graphState(taskGraphId)) === 'blocked', 'the graph blocked', 60_000);
  await eventually(async () => {
    const out = await temporal('workflow', 'list', '--query', `${SEARCH_ATTRIBUTES.state.name}='blocked'`, '--output', 'json');
    return out.includes(workflowId);
  }, '`temporal workflow list` finds the blocked graph', 30_000);
  fixed.add(taskId('broken'));
  await temporal('workflow', 'signal', '--workflow-id', workflowId, '--name', rerunSignal.name, '--input', JSON.stringify({ label: 'broken' }));
  assert.deepEqual(await stack.client.workflow.getHandle(workflowId).result(), { taskGraphId, state: 'finished' });
});

/** A graph whose tasks of the given labels only this test claims (worker type `manual`); the others the fast worker runs. */
function withManual(graph: ReturnType<typeof graphOf>, ...manual: string[]) {
  for (const label of manual) (graph.tasks[label].task as { workerType: string }).workerType = 'manual';
  return graph;
}
async function claimAndCompleteManual(taskId: string) {
  await eventually(async () => (await taskState(taskId)) === 'pending', `${taskId} pending`, 60_000);
  const claim = await stack.api.request('POST', '/api/queue/v1/claim-work/tgs-test/manual', { tasks: 1, workerGroup: 'g', workerId: 'w' });
  assert.equal(claim.body.tasks[0]?.status.taskId, taskId, JSON.stringify(claim.body));
  const done = await stack.api.request('POST', `/api/queue/v1/task/${taskId}/runs/0/completed`);
  assert.equal(done.status, 200, JSON.stringify(done.body));
}
const runsOf = async (taskId: string) => ((await stack.api.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status.runs as unknown[]).length;
const workflowStatus = async (workflowId: string) => (await stack.client.workflow.getHandle(workflowId).describe()).status.name;

// Temporal's own buttons on the cluster topology, through the stock CLI (docs/temporal.md § What Temporal's own
// operations do to a graph); test/e2e/temporalButtons.test.ts tries each in more cases on the dev server.
test('on the cluster, `temporal workflow cancel` cancels the graph: its unresolved tasks canceled, the workflow Canceled', async () => {
  const g = await submit(withManual(graphOf({ held: {}, waiting: { requires: ['held'] }, done: {} }), 'held'));
  await eventually(async () => (await taskState(g.taskId('held'))) === 'pending', 'held pending', 60_000);
  await eventually(async () => (await taskState(g.taskId('done'))) === 'completed', 'done completed', 60_000);
  await temporal('workflow', 'cancel', '--workflow-id', g.workflowId);
  await eventually(async () => (await graphState(g.taskGraphId)) === 'canceled', 'the graph canceled', 60_000);
  assert.equal(await taskState(g.taskId('held')), 'exception');
  assert.equal(await taskState(g.taskId('waiting')), 'exception');
  assert.equal(await taskState(g.taskId('done')), 'completed');
  await eventually(async () => (await workflowStatus(g.workflowId)) === 'CANCELLED', 'the workflow Canceled', 30_000);
});

test('on the cluster, `temporal workflow terminate` is noticed within 60 s, and resume finishes the graph with no task run twice', async () => {
  const g = await submit(withManual(graphOf({ one: {}, two: { requires: ['one'] } }), 'two'));
  await eventually(async () => (await taskState(g.taskId('two'))) === 'pending', 'two pending', 60_000);
  await temporal('workflow', 'terminate', '--workflow-id', g.workflowId, '--reason', 'wrong graph');
  await eventually(async () => (await graphState(g.taskGraphId)) === 'terminated', 'the graph marked terminated', 60_000);
  const resumed = await stack.api.request('POST', `/api/scheduler/v1/task-graph/${g.taskGraphId}/resume`);
  assert.equal(resumed.status, 200, JSON.stringify(resumed.body));
  await claimAndCompleteManual(g.taskId('two'));
  await eventually(async () => (await graphState(g.taskGraphId)) === 'finished', 'the resumed graph finished', 60_000);
  assert.equal(await runsOf(g.taskId('one')), 1, 'one ran once');
  assert.equal(await runsOf(g.taskId('two')), 1, 'two ran once');
});

test('on the cluster, `temporal workflow reset` to the first workflow task continues the graph with no task run twice', async () => {
  const g = await submit(withManual(graphOf({ first: {}, held: { requires: ['first'] }, last: { requires: ['held'] } }), 'held'));
  await eventually(async () => (await taskState(g.taskId('held'))) === 'pending', 'held pending', 60_000);
  await temporal('workflow', 'reset', '--workflow-id', g.workflowId, '--type', 'FirstWorkflowTask', '--reason', 'test');
  await claimAndCompleteManual(g.taskId('held'));
  assert.deepEqual(await stack.client.workflow.getHandle(g.workflowId).result(), { taskGraphId: g.taskGraphId, state: 'finished' });
  for (const label of ['first', 'held', 'last']) assert.equal(await runsOf(g.taskId(label)), 1, `${label} ran once`);
});

test('a graph in flight finishes through a SIGKILL of history, a SIGKILL of matching and a restart of the frontend', async () => {
  // Tasks of worker type `manual`: nobody claims them but this test, so each fault strikes between a task's
  // completion and the scheduling of the next, while the resolution travels bridge → signal → workflow.
  const graph = graphOf({ one: {}, two: { requires: ['one'] }, three: { requires: ['two'] }, four: { requires: ['three'] } });
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = 'manual';
  const { taskGraphId, workflowId, taskId } = await submit(graph);

  const claimAndComplete = async (label: string) => {
    await eventually(async () => (await taskState(taskId(label))) === 'pending', `${label} pending`, 60_000);
    const claim = await stack.api.request('POST', '/api/queue/v1/claim-work/tgs-test/manual', { tasks: 1, workerGroup: 'g', workerId: 'w' });
    assert.equal(claim.body.tasks[0]?.status.taskId, taskId(label), JSON.stringify(claim.body));
    const done = await stack.api.request('POST', `/api/queue/v1/task/${taskId(label)}/runs/0/completed`);
    assert.equal(done.status, 200, JSON.stringify(done.body));
  };

  const faults: { name: string; service: ClusterService; fault: () => Promise<number>; next: string; after: string }[] = [
    { name: 'SIGKILL of history', service: 'history', after: 'one', next: 'two', fault: async () => (await cluster.kill('history'), cluster.restart('history')) },
    { name: 'SIGKILL of matching', service: 'matching', after: 'two', next: 'three', fault: async () => (await cluster.kill('matching'), cluster.restart('matching')) },
    { name: 'restart of the frontend', service: 'frontend', after: 'three', next: 'four', fault: () => cluster.restart('frontend') },
  ];
  for (const { name, service, fault, after: done, next } of faults) {
    const before = cluster.processes[service].pid;
    await claimAndComplete(done);
    const struck = Date.now();
    const restartMs = await fault();
    assert.notEqual(cluster.processes[service].pid, before, `${service} is a new process`);
    await eventually(async () => (await taskState(taskId(next))) === 'pending', `${next} scheduled after the ${name}`, 120_000);
    say(`${name}: ${service} serving again ${restartMs} ms after its restart began; "${next}" scheduled ${Date.now() - struck} ms after "${done}" completed`);
  }
  await claimAndComplete('four');
  assert.deepEqual(await stack.client.workflow.getHandle(workflowId).result(), { taskGraphId, state: 'finished' });
  assert.equal(await graphState(taskGraphId), 'finished');
  assert.equal((await queryStatus(workflowId)).counts.completed, 4);
});
