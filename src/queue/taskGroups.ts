import type pg from 'pg';
import type { Config } from '../config.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { enqueueMessages } from '../exchanges/outbox.js';
import { queueExchangeName } from '../exchanges/exchanges.js';
import { isUnresolvedSql } from './taskRow.js';

/**
 * SQL: group `g` was not announced since its last new task and has no unscheduled, pending or running task left:
 * one probe of the partial index of unresolved tasks per group, whatever the table's statistics say (migration 019).
 */
const UNANNOUNCED_AND_DONE = `g.resolved_at IS NULL
  AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_group_id = g.task_group_id AND ${isUnresolvedSql('t')})`;

/** Of the groups $1, those UNANNOUNCED_AND_DONE (GroupAnnouncer's check after reports committed). */
export const DONE_GROUPS_SQL = `SELECT g.task_group_id FROM task_groups g WHERE g.task_group_id = ANY($1) AND ${UNANNOUNCED_AND_DONE}`;

/** Marks the groups $1 that are UNANNOUNCED_AND_DONE as announced. */
export const ANNOUNCE_GROUPS_SQL = `UPDATE task_groups g SET resolved_at = now()
  WHERE g.task_group_id = ANY($1) AND ${UNANNOUNCED_AND_DONE}
  RETURNING g.task_group_id, g.scheduler_id`;

/** Up to $1 groups UNANNOUNCED_AND_DONE, whichever they are (the backstop sweep). */
export const UNANNOUNCED_DONE_GROUPS_SQL = `SELECT g.task_group_id FROM task_groups g WHERE ${UNANNOUNCED_AND_DONE} LIMIT $1`;

/**
 * Writes one task-group-resolved message for each of these groups that has no unresolved task left and
 * has not been announced since its last new task.
 */
export async function resolveTaskGroupsIfDone(db: Queryable, config: Config, taskGroupIds: string[]): Promise<void> {
  if (taskGroupIds.length === 0) return;
  const ids = [...new Set(taskGroupIds)].sort();
  // Two transactions resolving a group's last two tasks would each see the other's task as unresolved and
  // neither would announce the group. Locking the group rows first serializes them: the later one's next
  // statement takes a fresh snapshot (READ COMMITTED) that includes the earlier one's commit.
  // Lock order everywhere: task rows, then group rows by id.
  await db.query('SELECT 1 FROM task_groups WHERE task_group_id = ANY($1) ORDER BY task_group_id FOR UPDATE', [ids]);
  const { rows } = await db.query<{ task_group_id: string; scheduler_id: string }>(ANNOUNCE_GROUPS_SQL, [ids]);
  await enqueueMessages(
    db,
    rows.map((g) => ({
      exchange: queueExchangeName(config.exchangePrefix, 'task-group-resolved'),
      routingKey: `_._._._._._.${g.scheduler_id}.${g.task_group_id}._`,
      payload: { taskGroupId: g.task_group_id, schedulerId: g.scheduler_id },
    })),
  );
}

/** Backstop sweep: every resolved group not announced yet (a crash between commit and check, or a race). */
export async function announceResolvedGroups(pool: pg.Pool, config: Config, limit = 500): Promise<number> {
  const { rows } = await pool.query<{ task_group_id: string }>(UNANNOUNCED_DONE_GROUPS_SQL, [limit]);
  if (rows.length === 0) return 0;
  await withTransaction(pool, (client) => resolveTaskGroupsIfDone(client, config, rows.map((r) => r.task_group_id)));
  return rows.length;
}

export interface TaskGroupRow {
  task_group_id: string;
  scheduler_id: string;
  expires: Date;
  sealed: Date | null;
}

export async function getTaskGroup(db: Queryable, taskGroupId: string): Promise<TaskGroupRow | undefined> {
  const { rows } = await db.query<TaskGroupRow>(
    'SELECT task_group_id, scheduler_id, expires, sealed FROM task_groups WHERE task_group_id = $1',
    [taskGroupId],
  );
  return rows[0];
}

/** A sealed group accepts no new tasks; sealing again keeps the first time. */
export async function sealTaskGroup(db: Queryable, taskGroupId: string): Promise<void> {
  await db.query('UPDATE task_groups SET sealed = coalesce(sealed, now()) WHERE task_group_id = $1', [taskGroupId]);
}
