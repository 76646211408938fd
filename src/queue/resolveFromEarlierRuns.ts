import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { enqueueMessages } from '../exchanges/outbox.js';
import { taskMessage } from './messages.js';
import { TASK_COLUMNS, type TaskRow } from './taskRow.js';

/** The worker group a cache hit's run names; its workerId is the source's taskId. */
export const CACHE_WORKER_GROUP = 'tgs-cache';

/** The worker group of a run an amend's early cutoff kept; its workerId is the replaced task's taskId. */
export const CUTOFF_WORKER_GROUP = 'tgs-cutoff';

/** A run reused instead of run: where it comes from, as the run records it. */
export type ReusedRun =
  | { taskId: string; cachedFrom: { taskId: string; runId: number; key: string; tier: string } }
  | { taskId: string; keptFrom: { taskId: string; runId: number } };

/**
 * Resolves unscheduled tasks `completed` from a run of another task: a cache hit (docs/formats.md § Cached tasks) or a
 * run an amend's early cutoff keeps (§ Early cutoff). Run 0 is added already resolved, with no claim, its workerGroup
 * `tgs-cache` or `tgs-cutoff`, its workerId the source's taskId and `cachedFrom` or `keptFrom` saying where it came
 * from (artifact reads follow it); the ordinary `task-completed` message goes out with the change. Only a task still
 * unscheduled, with no run and before its deadline is changed (so a retried activity, a cancel or a deadline that came
 * first wins); the rows changed are returned.
 */
export async function resolveFromEarlierRuns(db: Queryable, config: Config, reused: ReusedRun[], now: Date): Promise<TaskRow[]> {
  if (reused.length === 0) return [];
  const at = now.toISOString();
  const runs = reused.map((h) => ({
    id: h.taskId,
    new_runs: [{
      runId: 0,
      state: 'completed',
      reasonCreated: 'scheduled',
      reasonResolved: 'completed',
      workerGroup: 'cachedFrom' in h ? CACHE_WORKER_GROUP : CUTOFF_WORKER_GROUP,
      workerId: 'cachedFrom' in h ? h.cachedFrom.taskId : h.keptFrom.taskId,
      scheduled: at,
      started: at,
      resolved: at,
      ...('cachedFrom' in h ? { cachedFrom: h.cachedFrom } : { keptFrom: h.keptFrom }),
    }],
  }));
  const { rows } = await db.query<TaskRow>(
    // v's columns are named unlike the table's, so RETURNING's TASK_COLUMNS name the task's
    `UPDATE tasks t SET state = 'completed', runs = v.new_runs, taken_until = NULL, pending_since = NULL
       FROM jsonb_to_recordset($1::jsonb) AS v(id text, new_runs jsonb)
      WHERE t.task_id = v.id AND t.state = 'unscheduled' AND jsonb_array_length(t.runs) = 0 AND t.deadline > $2::timestamptz
      RETURNING ${TASK_COLUMNS}`,
    [JSON.stringify(runs), at],
  );
  // enqueueMessages wakes the relay after the commit
  await enqueueMessages(db, rows.map((row) => taskMessage(config, 'task-completed', row, 0)));
  return rows;
}

