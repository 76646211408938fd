import type pg from 'pg';
import type { Config } from '../config.js';
import { withTransaction } from '../db/pool.js';
import { applyChange } from './applyChange.js';
import { announceResolvedGroups } from './taskGroups.js';
import { deleteExpiredClients } from '../auth/clients.js';
import { purgeAuditHistory } from '../auth/audit.js';
import { resolutionMessage, taskMessage } from './messages.js';
import { addPendingRun, isUnresolvedSql, mayRetry, resolveLatestRun } from './taskRow.js';
import { isResolved } from '../taskStates.js';
import type { OutboxMessage } from '../exchanges/outbox.js';
import { OutageLog } from '../outageLog.js';

const BATCH = 500;

/** Locks up to BATCH ids matching `where` (SKIP LOCKED: several API processes sweep side by side) and changes them. */
async function sweep(pool: pg.Pool, config: Config, where: string, change: Parameters<typeof applyChange>[3]): Promise<number> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ task_id: string }>(
      `SELECT task_id FROM tasks WHERE ${where} LIMIT ${BATCH} FOR UPDATE SKIP LOCKED`,
    );
    if (rows.length === 0) return 0;
    const { changed } = await applyChange(client, config, rows.map((r) => r.task_id), change);
    return changed.length;
  });
}

/**
 * Claim expiry: a running run whose takenUntil passed → exception claim-expired, retried while retries last, the
 * deadline has not passed and the task has fewer than 50 runs (mayRetry).
 */
export function expireClaims(pool: pg.Pool, config: Config): Promise<number> {
  return sweep(pool, config, `state = 'running' AND taken_until < now()`, (row) => {
    if (row.state !== 'running') return undefined;
    const now = new Date();
    const run = resolveLatestRun(row, 'exception', 'claim-expired', now);
    const messages: OutboxMessage[] = [resolutionMessage(config, row, run.runId)];
    if (mayRetry(row) && row.deadline > now) {
      row.retries_left--;
      const retry = addPendingRun(row, 'retry', now);
      messages.push(taskMessage(config, 'task-pending', row, retry.runId));
    }
    return messages;
  });
}

/** Deadline: every unresolved task past its deadline → exception deadline-exceeded. */
export function resolveDeadlines(pool: pg.Pool, config: Config): Promise<number> {
  return sweep(pool, config, `${isUnresolvedSql()} AND deadline <= now()`, (row) => {
    if (isResolved(row.state)) return undefined;
    const run = resolveLatestRun(row, 'exception', 'deadline-exceeded', new Date());
    return [resolutionMessage(config, row, run.runId)];
  });
}

/**
 * The expiry sweep's pick, oldest first. The order is what keeps it on the `expires` index: with statistics taken
 * while `tasks` was near empty (or an expiry histogram that does not know today) the planner expects a third of
 * the rows to have expired, and without ORDER BY it scanned the whole table every sweep to find none (26 ms for
 * 30,000 tasks, 97 ms for 100,000, every 5 s; 2 buffers through the index).
 */
export const EXPIRED_TASKS_DELETE = `DELETE FROM tasks WHERE task_id IN
  (SELECT task_id FROM tasks WHERE expires < now() ORDER BY expires LIMIT ${BATCH} FOR UPDATE SKIP LOCKED) RETURNING task_id`;

/**
 * Expiry: tasks past `expires` go, with their dependency rows, artifacts and empty groups, and with a group
 * the task-graph of the same id (a graph's tasks are its group) and its nodes (ON DELETE CASCADE).
 */
export async function deleteExpired(pool: pg.Pool): Promise<number> {
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ task_id: string }>(EXPIRED_TASKS_DELETE);
    const ids = rows.map((r) => r.task_id);
    if (ids.length > 0) {
      await client.query('DELETE FROM task_dependencies WHERE dependent_task_id = ANY($1) OR required_task_id = ANY($1)', [ids]);
      await client.query('DELETE FROM artifacts WHERE task_id = ANY($1)', [ids]);
    }
    await client.query(
      `DELETE FROM artifacts WHERE (task_id, run_id, name) IN (SELECT task_id, run_id, name FROM artifacts WHERE expires < now() ORDER BY expires LIMIT ${BATCH})`,
    );
    const { rowCount } = await client.query(
      `WITH gone AS (
         DELETE FROM task_groups g WHERE g.expires < now() AND NOT EXISTS (SELECT 1 FROM tasks t WHERE t.task_group_id = g.task_group_id)
         RETURNING task_group_id)
       DELETE FROM task_graphs WHERE task_graph_id IN (SELECT task_group_id FROM gone)`,
    );
    return ids.length + (rowCount ?? 0);
  });
}

/** A sweep another module owns (e.g. the scheduler's), run with the queue's. */
export type ExtraSweep = readonly [name: string, run: () => Promise<number>];

/**
 * Runs every sweep every interval until stopped, each on its own timer: a sweep that waits long (one talking to a
 * Temporal that does not answer) delays only itself, never claim expiry or deadlines. A failing sweep is tried again
 * next time, and logged when it starts failing and when it works again (a database outage is two lines, not one per
 * sweep and interval).
 */
export function startSweeps(pool: pg.Pool, config: Config, log: (line: string) => void = (l) => console.error(l), extra: ExtraSweep[] = []) {
  let stopped = false;
  const sweeps: ExtraSweep[] = [
    ['claim expiry', () => expireClaims(pool, config)],
    ['deadlines', () => resolveDeadlines(pool, config)],
    ['expiry', () => deleteExpired(pool)],
    ['task-group-resolved', () => announceResolvedGroups(pool, config)],
    ['client expiry', () => deleteExpiredClients(pool)],
    ['audit history', () => purgeAuditHistory(pool)],
    ...extra,
  ];
  const timers = new Set<NodeJS.Timeout>();
  const running = new Set<Promise<void>>();
  for (const [name, fn] of sweeps) {
    const outage = new OutageLog(log, `sweep ${name}`);
    const once = async () => {
      try {
        // drain: a full batch means there may be more
        while (!stopped && (await fn()) >= BATCH);
        outage.recovered();
      } catch (err) {
        if (!stopped) outage.failed(err, `tried again every ${config.sweepIntervalMs} ms`);
      }
    };
    const schedule = () => {
      if (stopped) return;
      const timer = setTimeout(() => {
        timers.delete(timer);
        const run = once().finally(() => {
          running.delete(run);
          schedule();
        });
        running.add(run);
      }, config.sweepIntervalMs);
      timers.add(timer);
    };
    schedule();
  }
  return {
    async stop() {
      stopped = true;
      for (const timer of timers) clearTimeout(timer);
      await Promise.all([...running]);
    },
  };
}
