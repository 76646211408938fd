import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { enqueueMessages } from '../exchanges/outbox.js';
import { taskMessage } from './messages.js';
import { TASK_COLUMNS, type TaskRow } from './taskRow.js';

/** The worker group a cache hit's run names; its workerId is the source's taskId. */
export const CACHE_WORKER_GROUP = 'tgs-cache';

/**
 * Resolves unscheduled tasks `completed` from the cache (docs/formats.md § Cached tasks): run 0 is added already
 * resolved, with no claim, its workerGroup `tgs-cache`, its workerId the source's taskId and `cachedFrom` saying
 * where it came from; the ordinary `task-completed` message goes out with the change. Only a task still unscheduled,
 * with no run and before its deadline is changed (so a retried activity, a cancel or a deadline that came first
 * wins); the rows changed are returned.
 */
export async function resolveFromCache(
  db: Queryable,
  config: Config,
  hits: { taskId: string; cachedFrom: { taskId: string; runId: number; key: string; tier: string } }[],
  now: Date,
): Promise<TaskRow[]> {
  if (hits.length === 0) return [];
  const at = now.toISOString();
  const runs = hits.map((h) => ({
    id: h.taskId,
    new_runs: [{
      runId: 0,
      state: 'completed',
      reasonCreated: 'scheduled',
      reasonResolved: 'completed',
      workerGroup: CACHE_WORKER_GROUP,
      workerId: h.cachedFrom.taskId,
      scheduled: at,
      started: at,
      resolved: at,
      cachedFrom: h.cachedFrom,
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
