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
 * Tells the graph's workflow about a committed amend (docs/temporal.md § The amend update): a running or blocked
 * graph's workflow gets the `amend` update; a finished graph's completed workflow is started again (a first run,
 * which takes every node's state from the queue, the superseded ones as non-members). A workflow that is not running
 * (a terminated graph) is left for `resume`, which loads the amended graph the same way.
 */
export async function amendWorkflow(deps: { config: Config; pool: pg.Pool; temporal: LazyTemporalClient }, result: AmendResult): Promise<AmendWorkflowOutcome> {
  const { graph } = result;
  const { summary } = result;
  // a metadata-only amend patched the tasks in place: the workflow's model has nothing to change
  if (summary.changed.length + summary.added.length + summary.dependent.length + summary.removed.length === 0) return 'unchanged';
  if (result.stateBefore === 'finished') {
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
  if (result.stateBefore !== 'running' && result.stateBefore !== 'blocked') return 'not-running';
  try {
    const client = await deps.temporal.get();
    await client.workflow.getHandle(workflowIdFor(graph.task_graph_id)).executeUpdate(amendUpdate, { args: [{ nodeCount: graph.node_count, superseded: result.superseded }] });
    return 'updated';
  } catch (err) {
    if (err instanceof WorkflowNotFoundError || /already completed|not found/i.test((err as Error).message)) return 'not-running';
    if (err instanceof WorkflowUpdateFailedError) return 'not-running';
    throw err;
  }
}
