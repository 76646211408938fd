import type { Queryable } from '../db/pool.js';
import { anyOf, prepared } from '../db/pool.js';

/**
 * SQL: of the tasks `t` that `taskMatch` (a condition on `t.task_id`) selects, those whose every dependency is
 * resolved the way the task's `requires` demands, as rows (task_id, resolved): readyTasks' statement, and the part
 * of the dispatch's one statement (src/activities/dispatchInOne.ts) that decides what it schedules.
 */
export const readySql = (taskMatch: string) => `SELECT t.task_id, dep.resolved FROM tasks t
       CROSS JOIN LATERAL (
         SELECT bool_and(coalesce(r.state, '') = 'completed'
                         OR (t.requires = 'all-resolved' AND coalesce(r.state, '') IN ('failed', 'exception'))) AS met,
                (extract(epoch FROM max((r.runs -> -1 ->> 'resolved')::timestamptz)) * 1000)::float8 AS resolved
         FROM task_dependencies d LEFT JOIN tasks r ON r.task_id = d.required_task_id
         WHERE d.dependent_task_id = t.task_id
       ) dep
       WHERE ${taskMatch} AND dep.met IS NOT FALSE`;

/**
 * Of these tasks, those whose every dependency is resolved the way the task's `requires` demands
 * (`all-completed`: completed; `all-resolved`: completed, failed or exception), read from the queue's stored
 * state. The scheduler asks this before it schedules anything, so a forged or stale resolution handed to a
 * graph's workflow can never start a task early. A dependency that no longer exists counts as unresolved.
 *
 * Each ready task maps to the latest `resolved` among its dependencies' latest runs (ms since the epoch; null
 * without dependencies): the start of the hop that ends when the task becomes pending (tgs_graph_hop_seconds).
 * The rows read to decide readiness hold it, so the metric costs no query of its own (a separate one per
 * dispatched batch was 12 % of Postgres' statement time in a 10,000-task graph run). The array through anyOf, so
 * that a dispatch of a few tasks keeps the statement's generic plan (src/db/pool.ts).
 */
export async function readyTasks(db: Queryable, taskIds: string[]): Promise<Map<string, number | null>> {
  if (taskIds.length === 0) return new Map();
  const { rows } = await db.query<{ task_id: string; resolved: number | null }>(
    prepared(readySql(`t.task_id = ${anyOf('$1', 'text')}`), [taskIds]),
  );
  return new Map(rows.map((r) => [r.task_id, r.resolved]));
}
