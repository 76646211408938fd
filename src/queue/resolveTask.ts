import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { enqueueMessages, type OutboxMessage } from '../exchanges/outbox.js';
import { resolutionMessage, taskMessage } from './messages.js';
import { notifyPending } from './notify.js';
import { addPendingRun, loadTasks, resolveLatestRun, saveTasks, taskStatus, type TaskRow, type TaskStatus } from './taskRow.js';

export const EXCEPTION_REASONS = ['worker-shutdown', 'malformed-payload', 'resource-unavailable', 'internal-error', 'intermittent-task'] as const;

async function lockRun(db: Queryable, taskId: string, runId: number): Promise<TaskRow> {
  const [row] = await loadTasks(db, [taskId], 'update');
  if (!row) throw new TgsError('ResourceNotFound', `task ${taskId} not found`);
  if (!row.runs[runId]) throw new TgsError('ResourceNotFound', `task ${taskId} has no run ${runId}`);
  return row;
}

/**
 * reportCompleted / reportFailed / reportException. Reporting the same result again is a no-op (200);
 * anything else on a run that is not running is a 409. worker-shutdown and intermittent-task retry the task
 * (new run, reasonCreated retry / task-retry) while retries are left.
 */
export async function resolveRun(
  db: Queryable,
  config: Config,
  taskId: string,
  runId: number,
  state: 'completed' | 'failed' | 'exception',
  reason?: string,
): Promise<TaskStatus> {
  const row = await lockRun(db, taskId, runId);
  const run = row.runs[runId];
  const reasonResolved = state === 'exception' ? (reason as string) : state;
  if (run.state === state && run.reasonResolved === reasonResolved) return taskStatus(row);
  if (run.state !== 'running' || runId !== row.runs.length - 1) {
    throw new TgsError('RequestConflict', `run ${runId} of task ${taskId} is ${run.state}, not running`);
  }
  const now = new Date();
  resolveLatestRun(row, state, reasonResolved, now);
  const messages: OutboxMessage[] = [resolutionMessage(config, row, runId)];
  if (state === 'exception' && (reason === 'worker-shutdown' || reason === 'intermittent-task') && row.retries_left > 0) {
    row.retries_left--;
    const retry = addPendingRun(row, reason === 'worker-shutdown' ? 'retry' : 'task-retry', now);
    messages.push(taskMessage(config, 'task-pending', row, retry.runId));
  }
  await saveTasks(db, [row]);
  await enqueueMessages(db, messages);
  // The group's task-group-resolved check runs after the commit: see announceGroupIfResolved.
  if (row.state === 'pending') await notifyPending(db, [`${row.provisioner_id}/${row.worker_type}`]);
  return taskStatus(row);
}

/** Moves takenUntil forward for the running latest run. */
export async function reclaimRun(db: Queryable, config: Config, taskId: string, runId: number): Promise<{ row: TaskRow; takenUntil: Date }> {
  const row = await lockRun(db, taskId, runId);
  const run = row.runs[runId];
  if (run.state !== 'running' || runId !== row.runs.length - 1) {
    throw new TgsError('RequestConflict', `run ${runId} of task ${taskId} is ${run.state}; only a running run can be reclaimed`);
  }
  const proposed = new Date(Date.now() + config.claimTimeoutSeconds * 1000);
  const takenUntil = run.takenUntil && new Date(run.takenUntil) > proposed ? new Date(run.takenUntil) : proposed;
  row.runs = [...row.runs.slice(0, -1), { ...run, takenUntil: takenUntil.toISOString() }];
  await saveTasks(db, [row]);
  return { row, takenUntil };
}
