import type { Config } from '../config.js';
import { anyOf, notifyAfterCommit, prepared, type Queryable } from '../db/pool.js';
import { OUTBOX_CHANNEL } from '../exchanges/outbox.js';
import { renderedMessagesInsert } from './messages.js';
import { notifyPending } from './notify.js';
import { loadTasks, taskStatus, TASK_COLUMNS, type TaskRow, type TaskStatus } from './taskRow.js';

/**
 * SQL: SCHEDULE's CTEs `locked`, `scheduled` (the rows made pending, `RETURNING t.*`) and `announced` (their
 * task-pending rows), for the tasks `candidates` (a condition on a row of tasks) selects, at the time given twice as
 * parameters (`nowTime` cast to timestamptz, `nowText` to text: one parameter cannot take both types). The dispatch's
 * one statement (src/activities/dispatchInOne.ts) schedules through them too, so both write the same rows and the same
 * messages.
 */
export const scheduleCtes = (candidates: string, nowTime: string, nowText: string) => `locked AS (
    SELECT task_id FROM tasks
    WHERE ${candidates} AND state = 'unscheduled' AND deadline > ${nowTime}::timestamptz
    ORDER BY task_id FOR UPDATE
  ), scheduled AS (
    UPDATE tasks t SET state = 'pending', taken_until = NULL, pending_since = ${nowTime}::timestamptz,
      runs = t.runs || jsonb_build_array(jsonb_build_object(
        'runId', jsonb_array_length(t.runs), 'state', 'pending', 'reasonCreated', 'scheduled', 'scheduled', ${nowText}::text))
    FROM locked WHERE t.task_id = locked.task_id AND t.state = 'unscheduled'
    RETURNING t.*
  ), announced AS (
    ${renderedMessagesInsert('scheduled', 'task-pending')}
  )`;

/**
 * Unscheduled → pending in one statement: lock the tasks still unscheduled and before their deadline (in taskId
 * order, as every bulk change locks), add run 0 (`reasonCreated: 'scheduled'`, the run addPendingRun in
 * src/queue/taskRow.ts builds) and write each one's task-pending row for the relay to render, as the claim
 * writes task-running (src/queue/claimWork.ts). Before, the rows were read with FOR UPDATE, changed in JavaScript
 * and written back with their messages: three statements, and the 10,000-task graph's dispatches spent 0.11 ms of
 * Postgres time a task on them (pg_stat_statements).
 */
const SCHEDULE = `WITH ${scheduleCtes(`task_id = ${anyOf('$1', 'text')}`, '$2', '$3')}
  SELECT ${TASK_COLUMNS} FROM scheduled`;

/** Unscheduled → pending (run 0, reasonCreated 'scheduled'); any other task is left as it is. */
export async function scheduleTasks(db: Queryable, _config: Config, taskIds: string[]): Promise<TaskStatus[]> {
  const now = new Date();
  const ids = [...new Set(taskIds)];
  const { rows: scheduled } = await db.query<TaskRow>(prepared(SCHEDULE, [ids, now.toISOString(), now.toISOString()]));
  if (scheduled.length > 0) {
    await notifyAfterCommit(db, OUTBOX_CHANNEL, ['']);
    await notifyPending(db, scheduled.map((r) => `${r.provisioner_id}/${r.worker_type}`));
  }
  const byId = new Map(scheduled.map((r) => [r.task_id, r]));
  for (const r of await loadTasks(db, ids.filter((id) => !byId.has(id)))) byId.set(r.task_id, r);
  // in the order asked; ids of no task are left out
  return ids.flatMap((id) => {
    const row = byId.get(id);
    return row ? [taskStatus(row)] : [];
  });
}
