import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import amqp from 'amqplib';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { eventually } from '../../support/stack.js';
import type { ClaimedTask } from '../../support/fastWorker.js';
import { graphOf } from '../../support/graphs.js';
import { findTemporalCli } from '../../src/temporal/devServer.js';
import { statusQuery, workflowIdFor } from '../../src/workflows/contract.js';
import type { GraphExplanation } from '../../src/scheduler/explainGraph.js';
import { useStack } from '../helpers/stackFixture.js';
import protoModule from '@temporalio/proto';

const { WorkflowTaskFailedCause } = protoModule.temporal.api.enums.v1;

/*
 * Temporal's own buttons (docs/temporal.md § What Temporal's own operations do to a graph), pressed with the stock
 * `temporal` CLI against the stack's dev server: cancel, terminate (then `tgs graph resume`), reset.
 */

/** Runs of each task the fast worker claimed. */
const runsByTask = new Map<string, number>();
/** Tasks whose payload says `hold` wait here until the test releases them. */
const held = new Map<string, () => void>();
const gates = new Map<string, Promise<void>>();
function gate(taskId: string): Promise<void> {
  let g = gates.get(taskId);
  if (!g) {
    g = new Promise<void>((resolve) => held.set(taskId, resolve));
    gates.set(taskId, g);
  }
  return g;
}
const release = (taskId: string) => {
  void gate(taskId);
  held.get(taskId)?.();
};

const stack = useStack({
  // the sweep that notices closed workflows runs with the others
  configOverrides: { sweepIntervalMs: 500 },
  worker: {
    concurrency: 8,
    decide: async (task: ClaimedTask) => {
      runsByTask.set(task.taskId, (runsByTask.get(task.taskId) ?? 0) + 1);
      if (task.task.payload.hold) await gate(task.taskId);
      const outcomes = task.task.payload.outcomes as ('completed' | 'failed')[];
      return outcomes[task.runId] ?? outcomes.at(-1) ?? 'completed';
    },
  },
});
const connections = new Set<{ close(): Promise<void> }>();
stack.onStop(async () => {
  for (const r of held.values()) r();
  await Promise.all([...connections].map((c) => c.close().catch(() => undefined)));
});

/** The stock Temporal CLI on the stack's dev server. */
async function temporal(...args: string[]): Promise<string> {
  const cli = findTemporalCli();
  assert.ok(cli, 'the Temporal CLI');
  return (await promisify(execFile)(cli, [...args, '--address', stack.config.temporalAddress])).stdout;
}
/** The `tgs` CLI as a user runs it, with root credentials from the environment. */
async function tgs(...args: string[]): Promise<string> {
  const env = { ...process.env, TGS_ROOT_URL: stack.api.rootUrl, TGS_CLIENT_ID: stack.api.root.clientId, TGS_ACCESS_TOKEN: stack.api.root.accessToken };
  return (await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', ...args], { env })).stdout;
}

async function submit(graph: unknown, taskGraphId = slugid.nice()) {
  const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graph);
  const ids = new Map(res.tasks.map((t) => [t.label, t.taskId]));
  return { taskGraphId, id: (label: string) => ids.get(label) as string, labels: [...ids.keys()] };
}
const graphState = async (id: string) => (await stack.root.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${id}/status`)).status.state;
const waitState = (id: string, state: string, timeoutMs = 60_000) => eventually(async () => (await graphState(id)) === state, `graph ${id} ${state}`, timeoutMs);
const taskState = async (taskId: string) => (await stack.root.request<{ status: { state: string } }>('queue', 'GET', `/task/${taskId}/status`)).status.state;
const waitTask = (taskId: string, state: string) => eventually(async () => (await taskState(taskId)) === state, `task ${taskId} ${state}`);
const explain = (id: string) => stack.root.request<GraphExplanation>('scheduler', 'GET', `/task-graph/${id}/explain`);
const describe = (id: string) => stack.client.workflow.getHandle(workflowIdFor(id)).describe();

/** The graph's messages on one scheduler exchange, bound as a consumer would (docs/formats.md § Scheduler exchanges). */
async function watch(taskGraphId: string, exchange: string) {
  const conn = await amqp.connect(stack.config.amqpUrl);
  connections.add(conn);
  const ch = await conn.createChannel();
  const { queue } = await ch.assertQueue('', { exclusive: true, autoDelete: true });
  const name = `${stack.config.exchangePrefix}scheduler/v1/${exchange}`;
  await ch.assertExchange(name, 'topic', { durable: true });
  await ch.bindQueue(queue, name, `*.*.*.*.*.*.${stack.config.schedulerId}.${taskGraphId}.#`);
  const messages: { messageId: string; body: { status: { state: string } } }[] = [];
  await ch.consume(queue, (m) => {
    if (m) messages.push({ messageId: String(m.properties.messageId), body: JSON.parse(m.content.toString()) });
  }, { noAck: true });
  return messages;
}

/**
 * The workflow tasks of the graph's current run that failed (a workflow task failing in a loop shows here), but those
 * the server failed because a signal arrived while the task ended the workflow (UnhandledCommand: Temporal runs the
 * task again with the signal, as it does for any workflow that ends while signals come).
 */
async function failedWorkflowTasks(taskGraphId: string): Promise<string[]> {
  const { events } = await stack.client.workflow.getHandle(workflowIdFor(taskGraphId)).fetchHistory();
  // the history's enums are numbers: name them, so the exception and the assertion's message read as the Web UI does
  return (events ?? []).flatMap((e) => {
    const failed = e.workflowTaskFailedEventAttributes;
    if (!failed) return [];
    const cause = WorkflowTaskFailedCause[failed.cause ?? 0] ?? String(failed.cause);
    return cause === 'WORKFLOW_TASK_FAILED_CAUSE_UNHANDLED_COMMAND' ? [] : [`${cause}: ${failed.failure?.message ?? ''}`];
  });
}

test('temporal workflow cancel ends the graph as tgs graph cancel does: canceled tasks, one canceled message, who asked, Canceled', async () => {
  const g = await submit(graphOf({ running: { payload: { hold: true } }, waiting: { requires: ['running'] }, done: {} }));
  const canceledMessages = await watch(g.taskGraphId, 'task-graph-canceled');
  await waitTask(g.id('running'), 'running');
  await waitTask(g.id('done'), 'completed');
  // the CLI takes a reason only for a batch (--query); its identity is pid@host@
  await temporal('workflow', 'cancel', '--workflow-id', workflowIdFor(g.taskGraphId));
  await waitState(g.taskGraphId, 'canceled');
  await waitTask(g.id('running'), 'exception');
  await waitTask(g.id('waiting'), 'exception');
  assert.equal(await taskState(g.id('done')), 'completed');
  await eventually(async () => (await describe(g.taskGraphId)).status.name === 'CANCELLED', 'workflow Canceled');
  assert.deepEqual(await failedWorkflowTasks(g.taskGraphId), [], 'no workflow task failed');
  // exactly one canceled message, with the canceled status
  await eventually(async () => canceledMessages.length > 0, 'the canceled message');
  await new Promise((r) => setTimeout(r, 1500));
  // one message: a workflow task run again repeats its id (consumers dedupe on it, docs/formats.md § Exchanges)
  assert.deepEqual([...new Set(canceledMessages.map((m) => m.messageId))], [`${g.taskGraphId}/task-graph-canceled/0`], JSON.stringify(canceledMessages));
  assert.ok(canceledMessages.every((m) => m.body.status.state === 'canceled'));
  // `graph why` and the info say canceled, and who asked
  const why = await explain(g.taskGraphId);
  assert.equal(why.state, 'canceled');
  assert.match(why.stateReason ?? '', /^canceled through Temporal by \d+@\S+$/);
  const printed = await tgs('graph', 'why', g.taskGraphId);
  assert.match(printed, /canceled \(canceled through Temporal by \d+@\S+\)/);
  assert.match(await tgs('graph', 'status', g.taskGraphId), /state {8}canceled \(canceled through Temporal/);
  assert.match(await tgs('graph', 'cancel', g.taskGraphId), /is canceled/);
  release(g.id('running'));
});

test('a cancellation with an identity and a reason (as the Web UI sends it) records both', async () => {
  const g = await submit(graphOf({ running: { payload: { hold: true } } }));
  await waitTask(g.id('running'), 'running');
  // the stock CLI sends no reason for one workflow (only a batch takes one, and does not pass it on): the request as
  // the Web UI's Cancel makes it
  await stack.client.workflowService.requestCancelWorkflowExecution({
    namespace: 'default',
    workflowExecution: { workflowId: workflowIdFor(g.taskGraphId) },
    identity: 'operator-alice',
    reason: 'operator says stop',
    requestId: slugid.v4(),
  });
  await waitState(g.taskGraphId, 'canceled');
  assert.equal((await explain(g.taskGraphId)).stateReason, 'canceled through Temporal by operator-alice: operator says stop');
  await waitTask(g.id('running'), 'exception');
  release(g.id('running'));
});

test('tgs graph cancel records who canceled', async () => {
  const g = await submit(graphOf({ running: { payload: { hold: true } } }));
  await waitTask(g.id('running'), 'running');
  await tgs('graph', 'cancel', g.taskGraphId);
  await waitState(g.taskGraphId, 'canceled');
  assert.equal((await explain(g.taskGraphId)).stateReason, `canceled by ${stack.api.root.clientId} through the scheduler API`);
  release(g.id('running'));
});

test('temporal workflow terminate: the graph is terminated within the bound, its tasks left as they are; tgs graph resume finishes it without rerunning a completed task', async () => {
  const g = await submit(graphOf({ first: {}, held: { requires: ['first'], payload: { hold: true } }, last: { requires: ['held'] }, aside: {} }));
  await waitTask(g.id('held'), 'running');
  await waitTask(g.id('aside'), 'completed');
  // resume is refused while the workflow runs
  await assert.rejects(stack.root.request('scheduler', 'POST', `/task-graph/${g.taskGraphId}/resume`), (err: Error & { status?: number }) => err.status === 409 && /still running/.test(err.message));
  const terminatedAt = Date.now();
  await temporal('workflow', 'terminate', '--workflow-id', workflowIdFor(g.taskGraphId), '--reason', 'oops, wrong graph');
  await waitState(g.taskGraphId, 'terminated', 60_000);
  const noticedMs = Date.now() - terminatedAt;
  assert.ok(noticedMs < 60_000, `noticed in ${noticedMs} ms`);
  // its tasks are left as they are
  assert.equal(await taskState(g.id('held')), 'running');
  assert.equal(await taskState(g.id('last')), 'unscheduled');
  const why = await explain(g.taskGraphId);
  assert.equal(why.state, 'terminated');
  assert.match(why.stateReason ?? '', /^its workflow was terminated at \S+ by \S+: oops, wrong graph$/);
  assert.deepEqual(why.rootCauses.map((c) => c.kind), ['graph-terminated']);
  assert.match(await tgs('graph', 'why', g.taskGraphId), new RegExp(`terminated .*\\n.*graph-terminated\\n.*tgs graph resume ${g.taskGraphId}`));
  const listed = await stack.root.request<{ taskGraphs: { status: { taskGraphId: string } }[] }>('scheduler', 'GET', '/task-graphs?state=terminated');
  assert.ok(listed.taskGraphs.some((t) => t.status.taskGraphId === g.taskGraphId), 'listed by state terminated');
  // the held task completes while nobody drives the graph: its resolution reaches no workflow
  release(g.id('held'));
  await waitTask(g.id('held'), 'completed');
  const printed = await tgs('graph', 'resume', g.taskGraphId);
  assert.match(printed, /resumed: it is running/);
  await waitState(g.taskGraphId, 'finished');
  for (const label of g.labels) assert.equal(runsByTask.get(g.id(label)), 1, `${label} ran once`);
  // resumed again: refused, the graph is finished
  await assert.rejects(stack.root.request('scheduler', 'POST', `/task-graph/${g.taskGraphId}/resume`), (err: Error & { status?: number }) => err.status === 409);
});

test('a graph resumed while a task runs: the task resolves into the new run and the graph finishes, each task run once', async () => {
  // watched before the submit: the first run's running message may go out before a queue bound after it
  const taskGraphId = slugid.nice();
  const running = await watch(taskGraphId, 'task-graph-running');
  const g = await submit(graphOf({ held: { payload: { hold: true } }, after: { requires: ['held'] } }), taskGraphId);
  await waitTask(g.id('held'), 'running');
  await temporal('workflow', 'terminate', '--workflow-id', workflowIdFor(g.taskGraphId), '--reason', 'test');
  await waitState(g.taskGraphId, 'terminated');
  await stack.root.request('scheduler', 'POST', `/task-graph/${g.taskGraphId}/resume`);
  await eventually(async () => (await describe(g.taskGraphId)).status.name === 'RUNNING', 'the new run');
  release(g.id('held'));
  await waitState(g.taskGraphId, 'finished');
  assert.equal(runsByTask.get(g.id('held')), 1);
  assert.equal(runsByTask.get(g.id('after')), 1);
  // the resumed run's running message has an id of its own
  await eventually(async () => running.length === 2, 'two running messages');
  assert.deepEqual(running.map((m) => m.messageId), [`${g.taskGraphId}/task-graph-running/0`, `${g.taskGraphId}/task-graph-running/1.0`]);
});

test('resume is refused for a canceled graph', async () => {
  const g = await submit(graphOf({ held: { payload: { hold: true } } }));
  await waitTask(g.id('held'), 'running');
  await stack.root.request('scheduler', 'POST', `/task-graph/${g.taskGraphId}/cancel`);
  await assert.rejects(stack.root.request('scheduler', 'POST', `/task-graph/${g.taskGraphId}/resume`), (err: Error & { status?: number }) => err.status === 409 && /canceled/.test(err.message));
  release(g.id('held'));
});

type HistoryEvent = NonNullable<Awaited<ReturnType<ReturnType<typeof stack.client.workflow.getHandle>['fetchHistory']>>['events']>[number];
async function history(taskGraphId: string): Promise<HistoryEvent[]> {
  return (await stack.client.workflow.getHandle(workflowIdFor(taskGraphId)).fetchHistory()).events ?? [];
}
/** A signal's argument as JSON text (the default payload converter's encoding). */
const signalText = (e: HistoryEvent) =>
  (e.workflowExecutionSignaledEventAttributes?.input?.payloads ?? []).map((p) => Buffer.from(p.data ?? new Uint8Array()).toString('utf8')).join('');
const isWorkflowTaskCompleted = (e: HistoryEvent) => e.workflowTaskCompletedEventAttributes != null;
/** Resets the graph's workflow with the stock CLI and waits for the new run. */
async function reset(taskGraphId: string, ...how: string[]) {
  const before = (await describe(taskGraphId)).runId;
  await temporal('workflow', 'reset', '--workflow-id', workflowIdFor(taskGraphId), ...how, '--reason', 'test reset');
  await eventually(async () => (await describe(taskGraphId)).runId !== before, 'the reset run');
}

test('a reset to the first workflow task continues the graph: no task runs twice, no resolution is lost', async () => {
  const g = await submit(graphOf({ first: {}, held: { requires: ['first'], payload: { hold: true } }, last: { requires: ['held'] }, aside: {} }));
  const finished = await watch(g.taskGraphId, 'task-graph-finished');
  await waitTask(g.id('held'), 'running');
  await waitTask(g.id('aside'), 'completed');
  await reset(g.taskGraphId, '--type', 'FirstWorkflowTask');
  release(g.id('held'));
  await waitState(g.taskGraphId, 'finished');
  await eventually(async () => (await describe(g.taskGraphId)).status.name === 'COMPLETED', 'the reset run completed');
  for (const label of g.labels) assert.equal(runsByTask.get(g.id(label)), 1, `${label} ran once`);
  await eventually(async () => finished.length > 0, 'finished message');
  assert.deepEqual([...new Set(finished.map((m) => m.messageId))], [`${g.taskGraphId}/task-graph-finished/0`]);
  assert.deepEqual((await failedWorkflowTasks(g.taskGraphId)).map((f) => f.split(':')[0]), ['WORKFLOW_TASK_FAILED_CAUSE_RESET_WORKFLOW'], 'the reset itself is the one failed workflow task');
});

test('a reset to the workflow task before a rerun, of a finished graph, reruns nothing and finishes it again', async () => {
  const g = await submit(graphOf({ flaky: { reruns: 1, outcomes: ['failed', 'completed'], payload: { hold: true } }, after: { requires: ['flaky'] } }));
  await waitTask(g.id('flaky'), 'running');
  release(g.id('flaky'));
  await waitState(g.taskGraphId, 'finished');
  await eventually(async () => (await describe(g.taskGraphId)).status.name === 'COMPLETED', 'workflow completed');
  assert.equal(runsByTask.get(g.id('flaky')), 2);
  const events = await history(g.taskGraphId);
  const failedAt = events.findIndex((e) => signalText(e).includes(`"taskId":"${g.id('flaky')}","runId":0,"state":"failed"`));
  assert.ok(failedAt > 0, 'the signal of the failed run');
  const rerunTask = events.slice(failedAt).find(isWorkflowTaskCompleted) as HistoryEvent;
  await reset(g.taskGraphId, '--event-id', String(rerunTask.eventId));
  await eventually(async () => (await describe(g.taskGraphId)).status.name === 'COMPLETED', 'the reset run completed');
  assert.equal(await graphState(g.taskGraphId), 'finished');
  assert.equal(runsByTask.get(g.id('flaky')), 2, 'flaky not rerun again');
  assert.equal(runsByTask.get(g.id('after')), 1, 'after ran once');
  assert.equal((await stack.root.request<{ status: { runs: unknown[] } }>('queue', 'GET', `/task/${g.id('flaky')}/status`)).status.runs.length, 2);
});

test('a reset to the workflow task before an extend: the extension runs once and the graph finishes', async () => {
  const g = await submit(graphOf({ held: { payload: { hold: true } } }));
  await waitTask(g.id('held'), 'running');
  const extension = graphOf({ added: { requires: ['held'] } });
  const extended = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'POST', `/task-graph/${g.taskGraphId}/extend`, { tasks: extension.tasks });
  const added = extended.tasks[0].taskId;
  await eventually(async () => (await history(g.taskGraphId)).some((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'extended'), 'the extended signal');
  const events = await history(g.taskGraphId);
  const extendAt = events.findIndex((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'extended');
  const before = events.slice(0, extendAt).filter(isWorkflowTaskCompleted).at(-1) as HistoryEvent;
  await reset(g.taskGraphId, '--event-id', String(before.eventId));
  release(g.id('held'));
  await waitState(g.taskGraphId, 'finished');
  assert.equal(runsByTask.get(g.id('held')), 1);
  assert.equal(runsByTask.get(added), 1);
});

test('a reset of a canceled graph to before its cancel: the graph stays canceled, nothing runs again, the new run ends', async () => {
  const g = await submit(graphOf({ flaky: { reruns: 1, outcomes: ['failed', 'completed'], payload: { hold: true } }, after: { requires: ['flaky'] }, done: {} }));
  await waitTask(g.id('done'), 'completed');
  await waitTask(g.id('flaky'), 'running');
  await tgs('graph', 'cancel', g.taskGraphId);
  await waitState(g.taskGraphId, 'canceled');
  await eventually(async () => (await describe(g.taskGraphId)).status.name === 'COMPLETED', 'workflow completed');
  release(g.id('flaky'));
  const events = await history(g.taskGraphId);
  const cancelAt = events.findIndex((e) => e.workflowExecutionSignaledEventAttributes?.signalName === 'cancel');
  const before = events.slice(0, cancelAt).filter(isWorkflowTaskCompleted).at(-1) as HistoryEvent;
  await reset(g.taskGraphId, '--event-id', String(before.eventId), '--reapply-exclude', 'Signal');
  // without the signals re-applied the new run believes flaky still runs: the reconcile signal makes it look now
  await temporal('workflow', 'signal', '--workflow-id', workflowIdFor(g.taskGraphId), '--name', 'reconcile');
  await eventually(async () => (await describe(g.taskGraphId)).status.name === 'COMPLETED', 'the reset run ended');
  assert.equal(await graphState(g.taskGraphId), 'canceled');
  assert.match((await explain(g.taskGraphId)).stateReason ?? '', /^canceled by .+ through the scheduler API$/);
  assert.equal(runsByTask.get(g.id('flaky')), 1, 'flaky not rerun');
  assert.equal(runsByTask.get(g.id('after')), undefined, 'after never ran');
  assert.equal(runsByTask.get(g.id('done')), 1);
});

test('signals of the wrong shape from the stock CLI are refused, never fail a workflow task; the graph goes on', async () => {
  const g = await submit(graphOf({ held: { payload: { hold: true } }, after: { requires: ['held'] } }));
  await waitTask(g.id('held'), 'running');
  const signal = (name: string, input?: string) =>
    temporal('workflow', 'signal', '--workflow-id', workflowIdFor(g.taskGraphId), '--name', name, ...(input === undefined ? [] : ['--input', input]));
  await signal('resolutions', '{"not": "a list"}');
  await signal('resolutions', '[null, 7]');
  await signal('extended');
  await signal('tasksDefined', '"nope"');
  await signal('rerun', '42');
  const handle = stack.client.workflow.getHandle(workflowIdFor(g.taskGraphId));
  const refused = await eventually(async () => {
    const r = (await handle.query(statusQuery)).refused;
    return r.length >= 4 ? r : undefined;
  }, 'the refusals');
  assert.ok(refused.some((r) => /signal resolutions refused/.test(r)), JSON.stringify(refused));
  assert.ok(refused.some((r) => /signal extended refused/.test(r)), JSON.stringify(refused));
  assert.ok(refused.some((r) => /signal tasksDefined refused/.test(r)), JSON.stringify(refused));
  release(g.id('held'));
  await waitState(g.taskGraphId, 'finished');
  assert.deepEqual(await failedWorkflowTasks(g.taskGraphId), [], 'no workflow task failed');
});
