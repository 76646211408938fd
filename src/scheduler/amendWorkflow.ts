import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import type pg from 'pg';
import type { Config } from '../config.js';
import type { LazyTemporalClient } from '../temporal/connection.js';
import { amendUpdate, workflowIdFor } from '../workflows/contract.js';
import type { AmendResult } from './amendTaskGraph.js';
import { startGraphWorkflow } from './startWorkflow.js';

/** What became of the graph's workflow after a committed amend (the endpoint's `workflow` field). */
export type AmendWorkflowOutcome = 'updated' | 'started' | 'unchanged' | 'not-running';

/**
 * Tells the graph's workflow about a committed amend (docs/temporal.md § The amendGraph and amend updates): a running or blocked
 * graph's workflow gets the `amend` update; a finished graph's completed workflow is started again (a first run,
 * which takes every node's state from the queue, the superseded ones as non-members). A workflow that is not running
 * (a terminated graph) is left for `resume`, which loads the amended graph the same way. Throws when Temporal cannot
 * be reached; the amend is committed by then.
 */
export async function amendWorkflow(deps: { config: Config; pool: pg.Pool; temporal: LazyTemporalClient }, result: AmendResult): Promise<AmendWorkflowOutcome> {
  const { graph, summary } = result;
  const structural = summary.changed.length + summary.added.length + summary.dependent.length + summary.removed.length > 0;
  if (result.stateBefore === 'finished') {
    // a metadata-only amend patched the tasks in place: the finished graph stays finished
    if (!structural) return 'unchanged';
    return startAgain(deps, result);
  }
  if (result.stateBefore !== 'running' && result.stateBefore !== 'blocked') return 'not-running';
  // sent even when nothing changed: a client retrying an amend whose update was lost tells the workflow again (it is
  // idempotent: the superseded list is every node any amend superseded)
  try {
    const client = await deps.temporal.get();
    await client.workflow.getHandle(workflowIdFor(graph.task_graph_id)).executeUpdate(amendUpdate, { args: [{ nodeCount: graph.node_count, superseded: result.superseded }] });
    return 'updated';
  } catch (err) {
    if (err instanceof WorkflowUpdateFailedError) return 'not-running';
    if (!(err instanceof WorkflowNotFoundError || /already completed|not found/i.test((err as Error).message))) throw err;
  }
  // A running graph whose workflow has closed: a finished graph reopened by an amend whose start failed (the retry of
  // that amend lands here), or a workflow closed early, which resume would start the same way.
  return startAgain(deps, result);
}

/** Starts the graph's workflow again, as a first run, once the run before it has closed. */
async function startAgain(deps: { config: Config; pool: pg.Pool; temporal: LazyTemporalClient }, result: AmendResult): Promise<AmendWorkflowOutcome> {
  const { graph } = result;
  // The run that announced `finished` may not have completed yet (it ends one workflow task later): a start then
  // would find it running and do nothing, leaving the amended graph undriven. Wait for it to close first.
  if (!(await closedWithin(deps.temporal, graph.task_graph_id, 10_000))) return 'not-running';
  await startGraphWorkflow(
    deps.temporal,
    deps.config,
    deps.pool,
    { taskGraphId: graph.task_graph_id, routing: graph.routing, taskCount: graph.task_count, name: graph.metadata.name as string | undefined },
    { taskGraphId: graph.task_graph_id },
    'ALLOW_DUPLICATE',
  );
  return 'started';
}

/** Whether the graph's workflow is closed (or gone), asked every 100 ms for up to `ms`. */
async function closedWithin(temporal: LazyTemporalClient, taskGraphId: string, ms: number): Promise<boolean> {
  const handle = (await temporal.get()).workflow.getHandle(workflowIdFor(taskGraphId));
  const until = Date.now() + ms;
  for (;;) {
    try {
      if ((await handle.describe()).status.name !== 'RUNNING') return true;
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) return true;
      throw err;
    }
    if (Date.now() > until) return false;
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}
