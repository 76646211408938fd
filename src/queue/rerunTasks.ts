import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { applyChange } from './applyChange.js';
import { taskMessage } from './messages.js';
import { addPendingRun, type TaskRow, type TaskStatus } from './taskRow.js';
import { isResolved } from '../taskStates.js';
import { MAX_RUNS } from './run.js';

/** What the rerun rules look at in a task. */
export interface RerunCandidate {
  task_id: string;
  /** the task's state (or its latest run's: the same for a task with runs) */
  state: string | null;
  deadline: Date;
  runCount: number;
}

/** A stored task as the rerun rules see it. */
export const rerunCandidate = (row: TaskRow): RerunCandidate => ({ task_id: row.task_id, state: row.state, deadline: row.deadline, runCount: row.runs.length });

/**
 * Why a task cannot be rerun, or undefined when it can (or when rerunning it is a no-op). `automatic`: a graph's
 * automatic rerun (a node's `reruns`), which answers only a failure: the queue's word wins over a forged or stale
 * resolution the workflow heard.
 */
export function rerunRefusal(task: RerunCandidate, now: Date, options: { automatic?: boolean } = {}): string | undefined {
  if (task.deadline <= now) return `task ${task.task_id} is past its deadline (${task.deadline.toISOString()})`;
  if (task.state !== null && isResolved(task.state) && task.runCount >= MAX_RUNS) return `task ${task.task_id} has reached ${MAX_RUNS} runs`;
  if (options.automatic && task.state !== 'failed') return `task ${task.task_id} is ${task.state} in the queue: an automatic rerun answers only a failure`;
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
    const refusal = rerunRefusal(rerunCandidate(row), now);
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
