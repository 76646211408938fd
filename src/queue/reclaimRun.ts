import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { loadTasks, saveTasks, type TaskRow } from './taskRow.js';

async function lockRun(db: Queryable, taskId: string, runId: number): Promise<TaskRow> {
  const [row] = await loadTasks(db, [taskId], 'update');
  if (!row) throw new TgsError('ResourceNotFound', `task ${taskId} not found`);
  if (!row.runs[runId]) throw new TgsError('ResourceNotFound', `task ${taskId} has no run ${runId}`);
  return row;
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
