import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { enqueueMessages } from '../exchanges/outbox.js';
import { queueExchangeName } from '../exchanges/exchanges.js';

/**
 * Writes one task-group-resolved message for each of these groups that has no unresolved task left and
 * has not been announced since its last new task.
 */
export async function resolveTaskGroupsIfDone(db: Queryable, config: Config, taskGroupIds: string[]): Promise<void> {
  if (taskGroupIds.length === 0) return;
  const { rows } = await db.query<{ task_group_id: string; scheduler_id: string }>(
    `UPDATE task_groups g SET resolved_at = now()
     WHERE g.task_group_id = ANY($1) AND g.resolved_at IS NULL
       AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_group_id = g.task_group_id AND t.state IN ('unscheduled', 'pending', 'running'))
     RETURNING g.task_group_id, g.scheduler_id`,
    [[...new Set(taskGroupIds)]],
  );
  await enqueueMessages(
    db,
    rows.map((g) => ({
      exchange: queueExchangeName(config.exchangePrefix, 'task-group-resolved'),
      routingKey: `_._._._._._.${g.scheduler_id}.${g.task_group_id}._`,
      payload: { taskGroupId: g.task_group_id, schedulerId: g.scheduler_id },
    })),
  );
}
