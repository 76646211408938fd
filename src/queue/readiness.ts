import type { Queryable } from '../db/pool.js';
import { prepared } from '../db/pool.js';

/**
 * Of these tasks, those whose every dependency is resolved the way the task's `requires` demands
 * (`all-completed`: completed; `all-resolved`: completed, failed or exception), read from the queue's stored
 * state. The scheduler asks this before it schedules anything, so a forged or stale resolution handed to a
 * graph's workflow can never start a task early. A dependency that no longer exists counts as unresolved.
 */
export async function readyTasks(db: Queryable, taskIds: string[]): Promise<Set<string>> {
  if (taskIds.length === 0) return new Set();
  const { rows } = await db.query<{ task_id: string }>(
    prepared(
      `SELECT t.task_id FROM tasks t
       WHERE t.task_id = ANY($1)
         AND NOT EXISTS (
           SELECT 1 FROM task_dependencies d LEFT JOIN tasks r ON r.task_id = d.required_task_id
           WHERE d.dependent_task_id = t.task_id
             AND NOT (coalesce(r.state, '') = 'completed'
                      OR (t.requires = 'all-resolved' AND coalesce(r.state, '') IN ('failed', 'exception'))))`,
      [taskIds],
    ),
  );
  return new Set(rows.map((r) => r.task_id));
}
