import type pg from 'pg';
import type { Config } from '../config.js';
import type { ClientRecord } from '../auth/authenticate.js';
import { notifySoon, prepared } from '../db/pool.js';
import { OUTBOX_CHANNEL } from '../exchanges/outbox.js';
import type { ClaimWaiter } from './claimWaiter.js';
import { runCredentials } from './credentials.js';
import type { TaskDefinition } from './definition.js';
import { renderedMessagesInsert } from './messages.js';
import { isPendingSql, taskStatus, TASK_COLUMNS, type TaskRow } from './taskRow.js';
import { observeClaimWork, taskPendingWait } from '../observability/metrics.js';
import type { WorkerRecorder } from './workers.js';
import { logClaimed, type LineLog } from './auditLines.js';

export interface ClaimRequest {
  provisionerId: string;
  workerType: string;
  workerGroup: string;
  workerId: string;
  /** 1 to MAX_CLAIM_COUNT (claimWork's `tasks`) */
  count: number;
}

/** The most tasks one claimWork call takes (Taskcluster's limit). */
export const MAX_CLAIM_COUNT = 32;

/**
 * One statement, so one round trip and no explicit transaction: pick (SKIP LOCKED lets any number of
 * claimers run at once without blocking on or double-claiming a task), mark the latest run running, and
 * write each claimed row's task-running message to the outbox for the relay to render. The same work as
 * BEGIN / SELECT FOR UPDATE / UPDATE / INSERT / COMMIT took five round trips; Postgres CPU per round trip
 * is what bounds claim+complete throughput here (docs/bench-journal/2026-11-23.md).
 *
 * The count is written into the text, one named statement per count, so that Postgres keeps one generic plan for
 * it: with `LIMIT $n` the generic plan assumed a tenth of the pending rows and a hash join over every task, so every
 * claim was planned for its values again (0.39 ms planning a claim of one task, against 0.26 ms executing it).
 */
const claimSql = (count: number) => `WITH picked AS (
    SELECT task_id FROM tasks
    WHERE provisioner_id = $1 AND worker_type = $2 AND ${isPendingSql()} AND deadline > now()
      -- a quarantined worker gets nothing until quarantineUntil: one primary-key probe in this statement (an
      -- InitPlan run once per claim; 0.04 ms of execution, 3 buffer hits, with 10,000 workers), no round trip
      AND NOT EXISTS (SELECT 1 FROM workers w WHERE w.task_queue_id = $1 || '/' || $2
                        AND w.worker_group = $3 AND w.worker_id = $4 AND w.quarantine_until > now())
    ORDER BY priority_rank DESC, pending_since, task_id
    LIMIT ${count} FOR UPDATE SKIP LOCKED
  ), claimed AS (
    UPDATE tasks t SET state = 'running', taken_until = $5::text::timestamptz, pending_since = NULL,
      runs = jsonb_set(t.runs, ARRAY[(jsonb_array_length(t.runs) - 1)::text],
        (t.runs -> -1) || jsonb_build_object('state', 'running', 'workerGroup', $3::text, 'workerId', $4::text,
                                             'takenUntil', $5::text, 'started', $6::text))
    FROM picked WHERE t.task_id = picked.task_id
    RETURNING t.*
  ), announced AS (
    ${renderedMessagesInsert('claimed', 'task-running')}
  )
  SELECT ${TASK_COLUMNS}, definition FROM claimed`;

/** claimSql for each count, made once. */
const claimStatements = Array.from({ length: MAX_CLAIM_COUNT }, (_, i) => claimSql(i + 1));
export const claimStatement = (count: number) => {
  if (!Number.isInteger(count) || count < 1 || count > MAX_CLAIM_COUNT) throw new RangeError(`claim count ${count} is not 1 to ${MAX_CLAIM_COUNT}`);
  return claimStatements[count - 1];
};

/**
 * Claims up to `count` pending tasks now: highest priority first, FIFO within a priority. Returns each
 * claimed run with the worker's temporary credentials.
 */
export async function claimPending(pool: pg.Pool, config: Config, issuer: ClientRecord, req: ClaimRequest) {
  const now = new Date();
  const takenUntil = new Date(now.getTime() + config.claimTimeoutSeconds * 1000);
  const { rows } = await pool.query<TaskRow & { definition: TaskDefinition }>(
    prepared(claimStatement(req.count), [req.provisionerId, req.workerType, req.workerGroup, req.workerId, takenUntil.toISOString(), now.toISOString()]),
  );
  if (rows.length === 0) return [];
  notifySoon(pool, OUTBOX_CHANNEL, '');
  return rows.map((row) => {
    const runId = row.runs.length - 1;
    const scheduled = row.runs[runId].scheduled;
    if (scheduled) taskPendingWait.observe(Math.max(0, now.getTime() - Date.parse(scheduled)) / 1000);
    return {
      status: taskStatus(row),
      runId,
      workerGroup: req.workerGroup,
      workerId: req.workerId,
      takenUntil: takenUntil.toISOString(),
      task: row.definition,
      credentials: runCredentials(issuer, { taskId: row.task_id, runId, workerGroup: req.workerGroup, workerId: req.workerId, takenUntil, taskScopes: row.definition.scopes }),
    };
  });
}

/** One run claimWork or a worker stream hands out. */
export type ClaimedRun = Awaited<ReturnType<typeof claimPending>>[number];

/** One `tasks claimed` line for the call's runs, and the worker seen with them (the workers table, explanations). */
export function recordClaims(log: LineLog, workers: WorkerRecorder, req: ClaimRequest, claimed: ClaimedRun[]): void {
  logClaimed(log, req, claimed.map((t) => ({ taskId: t.status.taskId, runId: t.runId, taskGroupId: t.status.taskGroupId })));
  workers.workerSeen(`${req.provisionerId}/${req.workerType}`, req.workerGroup, req.workerId, claimed.map((t) => ({ taskId: t.status.taskId, runId: t.runId })));
}

/** Long-polls: returns as soon as something was claimed, or an empty list after `waitMs`. */
export async function claimWork(pool: pg.Pool, config: Config, issuer: ClientRecord, waiter: ClaimWaiter, req: ClaimRequest, waitMs: number, signal?: AbortSignal) {
  const started = Date.now();
  const until = started + waitMs;
  const queue = `${req.provisionerId}/${req.workerType}`;
  for (;;) {
    const generation = waiter.generation(queue);
    const claimed = await claimPending(pool, config, issuer, req);
    if (claimed.length > 0 || Date.now() >= until || signal?.aborted || waiter.stopped) {
      observeClaimWork((Date.now() - started) / 1000, claimed.length);
      return claimed;
    }
    await waiter.wait(queue, until, signal, generation);
  }
}
