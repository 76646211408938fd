import type pg from 'pg';
import type { Config } from '../config.js';
import { withTransaction } from '../db/pool.js';
import { enqueueMessages, type OutboxMessage } from '../exchanges/outbox.js';
import { tgsExchangeName } from '../exchanges/exchanges.js';
import { taskRouting } from './messages.js';
import { queueAvailability } from './queueAvailability.js';
import { TASK_COLUMNS, taskStatus, type TaskRow } from './taskRow.js';

/** Stalls announced in one statement at most; a sweep that announced this many runs again at once. */
const BATCH = 500;

/**
 * Whether a queue's pending tasks are stalled: the blocker a `task-stalled` message names. Only `no-workers` (and
 * `quarantined`, whose only workers take nothing) stall a task: busy workers are progress.
 */
const STALLING = new Set(['no-workers', 'quarantined']);

/**
 * `task-stalled` (docs/formats.md § tgs exchanges): once per run and blocker, a pending task that has waited longer
 * than TGS_STALL_AFTER_MS on a queue with no workers (or only quarantined ones) is announced with Taskcluster's
 * routing key, so an alert binds `*.*.*.*.<provisionerId>.<workerType>.#` of the queues it watches. The row in
 * `task_stalls` and its message commit together; the row goes when the run stops waiting or its queue has workers
 * again, so a later stall is announced anew. Several API processes may sweep at once: the row's primary key lets one
 * announce.
 */
export async function announceStalls(pool: pg.Pool, config: Config, now: Date): Promise<number> {
  const since = new Date(now.getTime() - config.stallAfterMs);
  const { rows: queues } = await pool.query<{ task_queue_id: string }>(
    `SELECT DISTINCT provisioner_id || '/' || worker_type AS task_queue_id FROM tasks
     WHERE tgs_task_pending(state) AND pending_since < $1`,
    [since],
  );
  const stalled = new Map<string, { kind: string; lastClaimWork: string | null }>();
  for (const { task_queue_id: q } of queues) {
    const availability = await queueAvailability(pool, q, now, config.claimWorkWaitMs);
    if (STALLING.has(availability.verdict)) stalled.set(q, { kind: availability.verdict, lastClaimWork: availability.lastClaimWork?.toISOString() ?? null });
  }
  // a stall whose run no longer waits, or whose queue has workers again, is over
  await pool.query(
    `DELETE FROM task_stalls s WHERE NOT (s.task_queue_id = ANY($1::text[]))
        OR NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_id = s.task_id AND tgs_task_pending(t.state) AND jsonb_array_length(t.runs) - 1 = s.run_id)`,
    [[...stalled.keys()]],
  );
  let announced = 0;
  for (const [taskQueueId, blocker] of stalled) {
    const [provisionerId, workerType] = taskQueueId.split('/');
    announced += await withTransaction(pool, async (client) => {
      const { rows } = await client.query<TaskRow & { announced: Date }>(
        `WITH fresh AS (
           INSERT INTO task_stalls (task_id, run_id, task_queue_id, kind, announced)
           SELECT t.task_id, jsonb_array_length(t.runs) - 1, $3, $4, $6 FROM tasks t
           WHERE t.provisioner_id = $1 AND t.worker_type = $2 AND tgs_task_pending(t.state) AND t.pending_since < $5
             AND NOT EXISTS (SELECT 1 FROM task_stalls s WHERE s.task_id = t.task_id)
           ORDER BY t.pending_since LIMIT ${BATCH}
           ON CONFLICT (task_id) DO NOTHING
           RETURNING task_id, announced)
         SELECT ${TASK_COLUMNS}, fresh.announced FROM tasks JOIN fresh USING (task_id)`,
        [provisionerId, workerType, taskQueueId, blocker.kind, since, now],
      );
      await enqueueMessages(client, rows.map((row) => taskStalledMessage(config, row, blocker, row.announced)));
      return rows.length;
    });
  }
  return announced;
}

/** A `task-stalled` message: the task's status, the run that waits and the blocker, under the task's routing key. */
export function taskStalledMessage(config: Config, row: TaskRow, blocker: { kind: string; lastClaimWork: string | null }, announced: Date): OutboxMessage {
  const runId = row.runs.length - 1;
  const taskQueueId = `${row.provisioner_id}/${row.worker_type}`;
  return {
    exchange: tgsExchangeName(config.exchangePrefix, 'task-stalled'),
    ...taskRouting(row, runId),
    payload: {
      version: 1,
      status: taskStatus(row),
      runId,
      blocker: {
        kind: blocker.kind,
        taskQueueId,
        lastClaimWork: blocker.lastClaimWork,
        action: blocker.kind === 'quarantined' ? `lift the quarantine of the workers of ${taskQueueId}` : `start a worker for ${taskQueueId}`,
      },
      waitingSince: row.runs[runId]?.scheduled ?? null,
    },
    messageId: `${row.task_id}/${runId}/task-stalled/${announced.getTime()}`,
  };
}

/**
 * The sweep: every TGS_STALL_AFTER_MS / 4 (at most every 30 s), and at once again after a full batch. Finding the
 * stalled queues reads every pending task past the threshold once: not worth doing every 5 s.
 */
export function stallSweep(pool: pg.Pool, config: Config, flushWorkers: () => Promise<void>): () => Promise<number> {
  let last = 0;
  let full = false;
  return async () => {
    const now = Date.now();
    if (!full && now - last < Math.min(30_000, Math.max(250, config.stallAfterMs / 4))) return 0;
    last = now;
    // this process's claims of the last 2 s, written first (another API process's are at most 2 s late: far inside
    // the no-workers window)
    await flushWorkers();
    const announced = await announceStalls(pool, config, new Date(now));
    full = announced >= BATCH;
    return announced;
  };
}
