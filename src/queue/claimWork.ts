import type pg from 'pg';
import type { Config } from '../config.js';
import type { ClientRecord } from '../auth/authenticate.js';
import { withTransaction } from '../db/pool.js';
import { enqueueMessages } from '../exchanges/outbox.js';
import type { ClaimWaiter } from './claimWaiter.js';
import { runCredentials } from './credentials.js';
import type { TaskDefinition } from './definition.js';
import { taskMessage } from './messages.js';
import { saveTasks, taskStatus, TASK_COLUMNS, type TaskRow } from './taskRow.js';

export interface ClaimRequest {
  provisionerId: string;
  workerType: string;
  workerGroup: string;
  workerId: string;
  count: number;
}

/**
 * Claims up to `count` pending tasks now: highest priority first, FIFO within a priority; SKIP LOCKED lets
 * any number of claimers run at once without blocking on or double-claiming a task.
 */
export async function claimPending(pool: pg.Pool, config: Config, issuer: ClientRecord, req: ClaimRequest) {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<TaskRow & { definition: TaskDefinition }>(
      `SELECT ${TASK_COLUMNS}, definition FROM tasks
       WHERE provisioner_id = $1 AND worker_type = $2 AND state = 'pending' AND deadline > now()
       ORDER BY priority_rank DESC, pending_since, task_id
       LIMIT $3 FOR UPDATE SKIP LOCKED`,
      [req.provisionerId, req.workerType, req.count],
    );
    if (rows.length === 0) return [];
    const now = new Date();
    const takenUntil = new Date(now.getTime() + config.claimTimeoutSeconds * 1000);
    for (const row of rows) {
      const run = row.runs[row.runs.length - 1];
      row.runs = [
        ...row.runs.slice(0, -1),
        { ...run, state: 'running', workerGroup: req.workerGroup, workerId: req.workerId, takenUntil: takenUntil.toISOString(), started: now.toISOString() },
      ];
      row.state = 'running';
    }
    await saveTasks(client, rows);
    await enqueueMessages(client, rows.map((r) => taskMessage(config, 'task-running', r, r.runs.length - 1)));
    return rows.map((row) => {
      const runId = row.runs.length - 1;
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
  });
}

/** Long-polls: returns as soon as something was claimed, or an empty list after `waitMs`. */
export async function claimWork(pool: pg.Pool, config: Config, issuer: ClientRecord, waiter: ClaimWaiter, req: ClaimRequest, waitMs: number, signal?: AbortSignal) {
  const until = Date.now() + waitMs;
  const queue = `${req.provisionerId}/${req.workerType}`;
  for (;;) {
    const generation = waiter.generation(queue);
    const claimed = await claimPending(pool, config, issuer, req);
    if (claimed.length > 0 || Date.now() >= until || signal?.aborted || waiter.stopped) return claimed;
    await waiter.wait(queue, until, signal, generation);
  }
}
