import type { Queryable } from '../db/pool.js';
import { SLUGID } from '../api/patterns.js';
import { TASK_COLUMNS, type TaskRow } from './taskRow.js';

/**
 * The most taskIds one `tasks` or `statuses` call may name. Taskcluster's schema sets none (its bodies may be
 * 10 MB); tgs bounds a call's scope check and lookups. createTask's `dependencies` take as many.
 */
export const MAX_BATCH_TASK_IDS = 10_000;

/**
 * The requested taskIds a page may answer: each once, only those that can name a task (a slugid: createTask
 * takes no other), after `after`, in byte order (slugids are ASCII; the SQL sorts with the C collation alike).
 */
export function batchTaskIds(taskIds: readonly string[], after: string): string[] {
  return [...new Set(taskIds)].filter((id) => SLUGID.test(id) && id > after).sort();
}

/**
 * Up to `limit` of these tasks that exist, in taskId order (C collation, as batchTaskIds sorts them): their rows
 * (`status`) or their definitions. Unknown taskIds are skipped, so a page holds only tasks and is short only at
 * the end. One index probe per taskId given: the caller passes only those after its continuation point.
 */
export async function loadTaskBatch(db: Queryable, taskIds: string[], limit: number, what: 'status'): Promise<TaskRow[]>;
export async function loadTaskBatch(db: Queryable, taskIds: string[], limit: number, what: 'definition'): Promise<{ task_id: string; definition: Record<string, unknown> }[]>;
export async function loadTaskBatch(db: Queryable, taskIds: string[], limit: number, what: 'status' | 'definition'): Promise<unknown[]> {
  if (taskIds.length === 0) return [];
  const columns = what === 'status' ? TASK_COLUMNS : 'task_id, definition';
  const { rows } = await db.query(`SELECT ${columns} FROM tasks WHERE task_id = ANY($1::text[]) ORDER BY task_id COLLATE "C" LIMIT $2`, [taskIds, limit]);
  return rows;
}
