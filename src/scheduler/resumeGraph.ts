import { WorkflowExecutionAlreadyStartedError, WorkflowNotFoundError } from '@temporalio/client';
import type pg from 'pg';
import type { Config } from '../config.js';
import { withTransaction } from '../db/pool.js';
import { deploymentIdOf } from '../db/deployment.js';
import { TgsError } from '../errors.js';
import type { LazyTemporalClient } from '../temporal/connection.js';
import { DEPLOYMENT_MEMO, SEARCH_ATTRIBUTES, WORKFLOW_TYPE, workflowIdFor, type TaskGraphInput } from '../workflows/contract.js';
import { getGraph, requireGraph, type GraphRow } from './graphStore.js';
import { graphPageLink } from './workflowLink.js';

/**
 * Starts the workflow of a graph whose workflow closed before the graph ended (G10, docs/formats.md § Graph
 * operations): `terminated`, or running/blocked with its workflow closed (the sweep has not marked it yet). The new run
 * is a first run, so it takes its nodes' states from the queue and the graph's tables (the loadNodes activity with the
 * queue's states): completed tasks stay completed, live ones are awaited, failed ones with reruns left are rerun. Under
 * the row's lock, which the sweep of closed workflows takes too: the graph's workflow must not be running (409), and a
 * finished or canceled graph is not started again (409). The start allows a new run only after a run that did not
 * complete (Temporal's ALLOW_DUPLICATE_FAILED_ONLY), so a graph whose workflow completed is never driven twice.
 */
export async function resumeGraph(
  deps: { pool: pg.Pool; config: Config; temporal: LazyTemporalClient },
  taskGraphId: string,
  who: string,
): Promise<GraphRow> {
  const { pool, config } = deps;
  const before = await requireGraph(pool, taskGraphId);
  refuseEnded(before);
  let client;
  try {
    client = await deps.temporal.get();
  } catch (err) {
    throw new TgsError('ServiceUnavailable', `Temporal is unreachable (${(err as Error).message}); retry shortly`);
  }
  const handle = client.workflow.getHandle(workflowIdFor(taskGraphId));
  // read before the transaction: on the embedded database the transaction holds its one session
  const deploymentId = await deploymentIdOf(pool);
  return withTransaction(pool, async (db) => {
    const row = (await getGraph(db, taskGraphId, true)) as GraphRow;
    refuseEnded(row);
    try {
      const { status } = await handle.describe();
      if (status.name === 'RUNNING') {
        throw new TgsError('RequestConflict', `task-graph ${taskGraphId} is ${row.state} and its workflow ${workflowIdFor(taskGraphId)} is still running: there is nothing to resume`);
      }
    } catch (err) {
      // a workflow past the namespace's retention is gone: the graph's tables and the queue still say everything
      if (!(err instanceof WorkflowNotFoundError)) throw err;
    }
    const link = graphPageLink(config, taskGraphId);
    const input: TaskGraphInput = { taskGraphId, ...(row.origin === 'queue' ? { origin: 'queue' as const } : {}) };
    try {
      await client.workflow.start(WORKFLOW_TYPE, {
        taskQueue: config.temporalTaskQueue,
        workflowId: workflowIdFor(taskGraphId),
        args: [input],
        workflowIdReusePolicy: 'ALLOW_DUPLICATE_FAILED_ONLY',
        // like every graph workflow tgs starts, it names its deployment (src/scheduler/startWorkflow.ts)
        memo: { [DEPLOYMENT_MEMO]: deploymentId, ...link.memo },
        typedSearchAttributes: [
          { key: SEARCH_ATTRIBUTES.state, value: 'running' },
          { key: SEARCH_ATTRIBUTES.schedulerId, value: row.scheduler_id },
        ],
        staticSummary: `task-graph ${row.metadata.name ? `“${row.metadata.name}” ` : ''}· ${row.task_count} tasks · routing ${row.routing || '_'} · resumed`,
        staticDetails: link.staticDetails,
      });
    } catch (err) {
      if (err instanceof WorkflowExecutionAlreadyStartedError) {
        throw new TgsError('RequestConflict', `task-graph ${taskGraphId}: its workflow is running, or completed, so it is not started again`);
      }
      throw new TgsError('ServiceUnavailable', `task-graph ${taskGraphId}: its workflow could not start again (${(err as Error).message}); retry`);
    }
    // The new run announces running itself (its messages numbered under the new count of resumes, migration 033).
    const { rows } = await db.query<GraphRow>(
      `UPDATE task_graphs SET state = 'running', state_reason = $2, resumes = resumes + 1, workflow_started = true, updated = now()
       WHERE task_graph_id = $1 RETURNING *`,
      [taskGraphId, `resumed by ${who}${row.state === 'terminated' && row.state_reason ? ` after ${row.state_reason}` : ''}`.slice(0, 2000)],
    );
    return rows[0];
  });
}

function refuseEnded(row: GraphRow): void {
  if (row.state === 'finished' || row.state === 'canceled') {
    throw new TgsError('RequestConflict', `task-graph ${row.task_graph_id} is ${row.state}: an ended graph is not resumed`);
  }
}
