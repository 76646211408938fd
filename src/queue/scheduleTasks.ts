import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { applyChange } from './applyChange.js';
import { taskMessage } from './messages.js';
import { addPendingRun, type TaskStatus } from './taskRow.js';

/** Unscheduled → pending (run 0, reasonCreated 'scheduled'); any other task is left as it is. */
export async function scheduleTasks(db: Queryable, config: Config, taskIds: string[]): Promise<TaskStatus[]> {
  const now = new Date();
  const { statuses } = await applyChange(db, config, taskIds, (row) => {
    if (row.state !== 'unscheduled' || row.deadline <= now) return undefined;
    const run = addPendingRun(row, 'scheduled', now);
    return [taskMessage(config, 'task-pending', row, run.runId)];
  });
  return statuses;
}
