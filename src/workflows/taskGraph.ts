/**
 * The taskGraph workflow: one per graph, id `task-graph/<taskGraphId>`. Its signals, queries and update are in
 * contract.ts; the state it keeps is a GraphModel (graphModel.ts); the steps of one run are GraphRun's (graphRun.ts).
 */
import * as wf from '@temporalio/workflow';
import { bulk } from './activityProxies.js';
import { INVALID_TASK_GRAPH, type TaskGraphInput, type TaskGraphResult } from './contract.js';
import { GraphRun } from './graphRun.js';

/**
 * Runs with this patch end the graph when Temporal cancels the workflow (the Web UI's Cancel, `temporal workflow
 * cancel`) as the `cancel` signal does, then end as Canceled (GraphRun.endCanceledByTemporal); runs without it ended
 * Canceled leaving the graph running (the sweep of closed workflows marks such a graph terminated,
 * src/scheduler/closedWorkflows.ts). Asked where the cancellation is handled, not at the start of the run: only a
 * cancellation reaches it, so runs started before the patch that are cancelled after it (and runs whose cancellation
 * failed their workflow task before it) end the graph too, and a replay asks at the same point.
 */
export const TEMPORAL_CANCEL_PATCH = 'temporal-cancel-ends-graph';

export async function taskGraph(input: TaskGraphInput): Promise<TaskGraphResult> {
  const taskGraphId = checkStart(input);
  let run: GraphRun | undefined;
  try {
    if (!input.carried && input.tasks !== undefined) {
      // Started natively with the graph itself: create its tasks (validated like PUT /task-graph).
      await invalidGraphFailsWorkflow(bulk.createGraph(taskGraphId, input));
    }
    run = await startRun(taskGraphId, input);
    await run.load();
    run.listen();
    await run.announceStart();
    run.reconcileWhenQuiet();
    return await run.loop();
  } catch (err) {
    if (!canceledByTemporal(err) || !wf.patched(TEMPORAL_CANCEL_PATCH)) throw err;
    await wf.CancellationScope.nonCancellable(async () => {
      const canceled = run ?? (await startAfterCancel(taskGraphId, input));
      await canceled?.endCanceledByTemporal();
    });
    // the workflow ends Canceled (the Web UI shows it so)
    throw err;
  }
}

async function startRun(taskGraphId: string, input: TaskGraphInput): Promise<GraphRun> {
  const meta = await invalidGraphFailsWorkflow(bulk.loadGraph(taskGraphId, input.origin === 'queue'));
  if (!input.carried && meta.origin === 'graph' && (meta.state === 'finished' || meta.state === 'canceled')) {
    // A closed graph stays closed: a start made directly on Temporal for a stored graph must not drive it again.
    throw wf.ApplicationFailure.nonRetryable(`task-graph ${taskGraphId} is ${meta.state}; its workflow is not started again`, INVALID_TASK_GRAPH);
  }
  return new GraphRun(taskGraphId, input, meta);
}

/**
 * The run a cancellation stopped before it had one (while the graph was created or its row read): the start done
 * again, so the tasks a native start created (its createGraph activity may have committed) are canceled too. None when
 * the graph is invalid or already closed.
 */
async function startAfterCancel(taskGraphId: string, input: TaskGraphInput): Promise<GraphRun | undefined> {
  try {
    if (!input.carried && input.tasks !== undefined) await invalidGraphFailsWorkflow(bulk.createGraph(taskGraphId, input));
    return await startRun(taskGraphId, input);
  } catch (err) {
    if (err instanceof wf.ApplicationFailure && err.type === INVALID_TASK_GRAPH) return undefined;
    throw err;
  }
}

/** A cancellation Temporal asked for (not an activity's own cancellation): the workflow's root scope is cancelled. */
function canceledByTemporal(err: unknown): boolean {
  return wf.isCancellation(err) && wf.CancellationScope.current().consideredCancelled;
}

/** The graph's id, once the workflow id and the input are known to be the workflow's own. */
function checkStart(input: TaskGraphInput): string {
  const info = wf.workflowInfo();
  const taskGraphId = graphIdFromWorkflowId(info.workflowId);
  if (input.taskGraphId !== undefined && input.taskGraphId !== taskGraphId) {
    throw wf.ApplicationFailure.nonRetryable(
      `input taskGraphId ${input.taskGraphId} does not match workflow id ${info.workflowId}`,
      INVALID_TASK_GRAPH,
    );
  }
  if (input.carried && info.continuedFromExecutionRunId === undefined) {
    // Carried state claims node states without the queue's word: only this workflow's own continue-as-new gives it.
    throw wf.ApplicationFailure.nonRetryable('carried state is accepted only from the workflow\'s own continue-as-new', INVALID_TASK_GRAPH);
  }
  return taskGraphId;
}

function graphIdFromWorkflowId(workflowId: string): string {
  const match = /^task-graph\/([A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw])$/.exec(workflowId);
  if (!match) {
    throw wf.ApplicationFailure.nonRetryable(
      `workflow id ${JSON.stringify(workflowId)} must be task-graph/<slugid>`,
      INVALID_TASK_GRAPH,
    );
  }
  return match[1];
}

/**
 * An invalid graph fails the workflow itself with the activity's InvalidTaskGraph failure, so callers
 * (and the Web UI) see `InvalidTaskGraph` and the offending labels, not a generic ActivityFailure.
 */
async function invalidGraphFailsWorkflow<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (err) {
    const cause = err instanceof wf.ActivityFailure ? err.cause : undefined;
    if (cause instanceof wf.ApplicationFailure && cause.type === INVALID_TASK_GRAPH) {
      throw wf.ApplicationFailure.create({ message: cause.message, type: INVALID_TASK_GRAPH, nonRetryable: true, details: cause.details as unknown[] });
    }
    throw err;
  }
}
