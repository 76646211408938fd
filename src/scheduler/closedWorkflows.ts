import type pg from 'pg';
import protoModule from '@temporalio/proto';
import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { withTransaction } from '../db/pool.js';
import type { LazyTemporalClient } from '../temporal/connection.js';
import { WORKFLOW_TYPE, workflowIdFor } from '../workflows/contract.js';

/** The statuses of a workflow that closed without ending its graph (a graph's workflow ends Completed, or continues as new). */
const CLOSED_EARLY = ['Terminated', 'TimedOut', 'Failed', 'Canceled'];
/** Visibility is eventually consistent: each listing reaches this far before the previous one started. */
const LISTING_OVERLAP_MS = 60_000;
const BATCH = 100;

/**
 * Marks `terminated` every running or blocked graph whose workflow closed without ending it (terminated, timed out,
 * failed, or cancelled by a workflow that predates TEMPORAL_CANCEL_PATCH), with why in state_reason; its tasks are left
 * as they are, and a resume (src/scheduler/resumeGraph.ts) starts the workflow again. One visibility listing of the
 * `taskGraph` workflows that closed so since the previous listing (the first one of the process: within the
 * namespace's retention) finds them, so no graph costs a call to Temporal unless its workflow closed. Safe with several
 * API processes and idempotent: the rows are taken FOR UPDATE SKIP LOCKED, and a graph is marked only when its
 * workflow's latest run, described under the row's lock, is not running (a resume, which takes the same lock, or a
 * reset may have started one since).
 */
export function closedWorkflowSweep(pool: pg.Pool, temporal: LazyTemporalClient): () => Promise<number> {
  let listedSince: Date | undefined;
  return async () => {
    // nothing to mark: Temporal is not asked (an API whose Temporal is down logs nothing for it), and the next
    // listing still reaches back to the previous one
    const { rows: live } = await pool.query(`SELECT 1 FROM task_graphs WHERE state IN ('running', 'blocked') LIMIT 1`);
    if (live.length === 0) return 0;
    const client = await temporal.get();
    const started = Date.now();
    const closedSince = listedSince ? ` AND CloseTime >= '${listedSince.toISOString()}'` : '';
    const query = `WorkflowType = '${WORKFLOW_TYPE}' AND ExecutionStatus IN (${CLOSED_EARLY.map((s) => `'${s}'`).join(', ')})${closedSince}`;
    const graphIds = new Set<string>();
    for await (const execution of client.workflow.list({ query, pageSize: 1000 })) {
      const match = /^task-graph\/(.+)$/.exec(execution.workflowId);
      if (match) graphIds.add(match[1]);
    }
    let marked = 0;
    const ids = [...graphIds];
    for (let i = 0; i < ids.length; i += BATCH) marked += await markTerminated(pool, client, ids.slice(i, i + BATCH));
    listedSince = new Date(started - LISTING_OVERLAP_MS);
    return marked;
  };
}

async function markTerminated(pool: pg.Pool, client: Client, taskGraphIds: string[]): Promise<number> {
  const { rows: any } = await pool.query(`SELECT 1 FROM task_graphs WHERE task_graph_id = ANY($1) AND state IN ('running', 'blocked') LIMIT 1`, [taskGraphIds]);
  if (any.length === 0) return 0;
  return withTransaction(pool, async (db) => {
    const { rows } = await db.query<{ task_graph_id: string }>(
      `SELECT task_graph_id FROM task_graphs WHERE task_graph_id = ANY($1) AND state IN ('running', 'blocked') FOR UPDATE SKIP LOCKED`,
      [taskGraphIds],
    );
    let marked = 0;
    for (const { task_graph_id: taskGraphId } of rows) {
      const reason = await closedReason(client, taskGraphId);
      if (reason === undefined) continue;
      await db.query(
        `UPDATE task_graphs SET state = 'terminated', state_reason = $2, updated = now() WHERE task_graph_id = $1 AND state IN ('running', 'blocked')`,
        [taskGraphId, reason.slice(0, 2000)],
      );
      marked++;
    }
    return marked;
  });
}

const { EventType } = protoModule.temporal.api.enums.v1;

/** How the graph's workflow's latest run closed, from its last event; undefined while it runs (or when it is gone). */
async function closedReason(client: Client, taskGraphId: string): Promise<string | undefined> {
  const workflowId = workflowIdFor(taskGraphId);
  let description;
  try {
    description = await client.workflow.getHandle(workflowId).describe();
  } catch (err) {
    if (err instanceof WorkflowNotFoundError) return undefined;
    throw err;
  }
  const status = description.status.name;
  if (status === 'RUNNING' || status === 'COMPLETED' || status === 'CONTINUED_AS_NEW') return undefined;
  const { history } = await client.workflowService.getWorkflowExecutionHistoryReverse({
    namespace: client.options.namespace,
    execution: { workflowId, runId: description.runId },
    maximumPageSize: 1,
  });
  const last = history?.events?.[0];
  const at = description.closeTime ? ` at ${description.closeTime.toISOString()}` : '';
  const by = (identity?: string | null, reason?: string | null) => `${identity ? ` by ${identity}` : ''}${reason ? `: ${reason}` : ''}`;
  switch (last?.eventType) {
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TERMINATED: {
      const a = last.workflowExecutionTerminatedEventAttributes;
      return `its workflow was terminated${at}${by(a?.identity, a?.reason)}`;
    }
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_TIMED_OUT:
      return `its workflow timed out${at}`;
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_FAILED:
      return `its workflow failed${at}${by(undefined, last.workflowExecutionFailedEventAttributes?.failure?.message)}`;
    case EventType.EVENT_TYPE_WORKFLOW_EXECUTION_CANCELED:
      return `its workflow was canceled${at} without ending the graph`;
    default:
      return `its workflow closed${at} (${status})`;
  }
}
