import type pg from 'pg';
import type { Config } from '../config.js';
import { notifySoon, prepared, type Queryable } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { OUTBOX_CHANNEL, outboxInsert, outboxRows, type OutboxMessage } from '../exchanges/outbox.js';
import { resolutionMessage, taskMessage } from './messages.js';
import { PENDING_CHANNEL } from './notify.js';
import type { GroupAnnouncer } from './groupAnnouncer.js';
import { addPendingRun, loadTask, loadTasks, resolveLatestRun, saveTasks, taskStatus, type TaskRow, type TaskStatus } from './taskRow.js';

export const EXCEPTION_REASONS = ['worker-shutdown', 'malformed-payload', 'resource-unavailable', 'internal-error', 'intermittent-task'] as const;

async function lockRun(db: Queryable, taskId: string, runId: number): Promise<TaskRow> {
  const [row] = await loadTasks(db, [taskId], 'update');
  if (!row) throw new TgsError('ResourceNotFound', `task ${taskId} not found`);
  if (!row.runs[runId]) throw new TgsError('ResourceNotFound', `task ${taskId} has no run ${runId}`);
  return row;
}

/**
 * Writes a report in one statement (one round trip, no explicit transaction), compare-and-set on the runs
 * the report was computed from: the task row and its messages commit together or not at all. Updates no
 * row when the task changed since it was read (a reclaim, a sweep): the caller reads again. The group's
 * task-group-resolved check follows the commit (GroupAnnouncer).
 */
const REPORT_SQL = `WITH reported AS (
    UPDATE tasks SET state = $3, runs = $4::jsonb, retries_left = $5, taken_until = NULL, pending_since = $6::timestamptz
    WHERE task_id = $1 AND runs = $2::jsonb
    RETURNING task_id
  ), messages AS (
    ${outboxInsert('$7')}
    WHERE EXISTS (SELECT 1 FROM reported)
    ORDER BY m.n
  )
  SELECT count(*) AS reported FROM reported`;

// A report races only with its own run's reclaim and the sweeps: a few rereads at most.
const MAX_REPORT_ATTEMPTS = 20;

/**
 * reportCompleted / reportFailed / reportException. Reporting the same result again is a no-op (200);
 * anything else on a run that is not running is a 409. worker-shutdown and intermittent-task retry the task
 * (new run, reasonCreated retry / task-retry) while retries are left.
 */
export async function resolveRun(
  pool: pg.Pool,
  config: Config,
  groups: Pick<GroupAnnouncer, 'note'>,
  taskId: string,
  runId: number,
  state: 'completed' | 'failed' | 'exception',
  reason?: string,
): Promise<TaskStatus> {
  for (let attempt = 1; ; attempt++) {
    const row = await loadTask(pool, taskId);
    if (!row) throw new TgsError('ResourceNotFound', `task ${taskId} not found`);
    const run = row.runs[runId];
    if (!run) throw new TgsError('ResourceNotFound', `task ${taskId} has no run ${runId}`);
    const reasonResolved = state === 'exception' ? (reason as string) : state;
    if (run.state === state && run.reasonResolved === reasonResolved) return taskStatus(row);
    if (run.state !== 'running' || runId !== row.runs.length - 1) {
      throw new TgsError('RequestConflict', `run ${runId} of task ${taskId} is ${run.state}, not running`);
    }
    const readRuns = row.runs;
    const now = new Date();
    resolveLatestRun(row, state, reasonResolved, now);
    const messages: OutboxMessage[] = [resolutionMessage(config, row, runId)];
    if (state === 'exception' && (reason === 'worker-shutdown' || reason === 'intermittent-task') && row.retries_left > 0) {
      row.retries_left--;
      const retry = addPendingRun(row, reason === 'worker-shutdown' ? 'retry' : 'task-retry', now);
      messages.push(taskMessage(config, 'task-pending', row, retry.runId));
    }
    const pending = row.state === 'pending';
    const { rows } = await pool.query<{ reported: number }>(
      prepared(REPORT_SQL, [
        taskId,
        JSON.stringify(readRuns),
        row.state,
        JSON.stringify(row.runs),
        row.retries_left,
        pending ? row.runs[row.runs.length - 1].scheduled : null,
        JSON.stringify(outboxRows(messages)),
      ]),
    );
    if (rows[0].reported === 1) {
      notifySoon(pool, OUTBOX_CHANNEL, '');
      if (pending) notifySoon(pool, PENDING_CHANNEL, `${row.provisioner_id}/${row.worker_type}`);
      else groups.note(row.task_group_id);
      return taskStatus(row);
    }
    if (attempt >= MAX_REPORT_ATTEMPTS) {
      throw new TgsError('InternalServerError', `task ${taskId} kept changing while run ${runId} was being reported; report again`);
    }
  }
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
