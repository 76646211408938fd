import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { applyChange } from './applyChange.js';
import { taskMessage } from './messages.js';
import { addPendingRun, type TaskRow, type TaskStatus } from './taskRow.js';
import { isResolved } from '../taskStates.js';
import { MAX_RUNS } from './run.js';

/** Why a task cannot be rerun, or undefined when it can (or when rerunning it is a no-op). */
export function rerunRefusal(row: TaskRow, now: Date): string | undefined {
  if (row.deadline <= now) return `task ${row.task_id} is past its deadline`;
  if (isResolved(row.state) && row.runs.length >= MAX_RUNS) return `task ${row.task_id} has reached ${MAX_RUNS} runs`;
  return undefined;
}

/**
 * Taskcluster's rerunTask, in bulk: a resolved task gets a new pending run (reasonCreated 'rerun') and its
 * retries back; an unscheduled task is scheduled; pending and running tasks are left alone. Tasks that
 * cannot be rerun (deadline, 50 runs) are skipped, or refused with 409 when `strict`.
 */
export async function rerunTasks(db: Queryable, config: Config, taskIds: string[], options: { strict?: boolean } = {}): Promise<TaskStatus[]> {
  const now = new Date();
  const { statuses } = await applyChange(db, config, taskIds, (row) => {
    const refusal = rerunRefusal(row, now);
    if (refusal) {
      if (options.strict) throw new TgsError('RequestConflict', refusal);
      return undefined;
    }
    if (row.state === 'pending' || row.state === 'running') return undefined;
    const run = addPendingRun(row, row.state === 'unscheduled' ? 'scheduled' : 'rerun', now);
    row.retries_left = row.retries;
    return [taskMessage(config, 'task-pending', row, run.runId)];
  });
  return statuses;
}
