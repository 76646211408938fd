import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { enqueueMessages, type OutboxMessage } from '../exchanges/outbox.js';
import { notifyPending, notifyRunsResolved, type ResolvedRun } from './notify.js';
import { resolveTaskGroupsIfDone } from './taskGroups.js';
import { loadTasks, saveTasks, taskStatus, type TaskRow, type TaskStatus } from './taskRow.js';

/**
 * The shape every bulk state change shares: lock the rows, let `change` edit each one in JavaScript
 * (returning its messages, or undefined for "untouched"), write the changed rows back in one statement,
 * enqueue the messages, wake claimers of tasks that became pending, tell the worker streams about running runs it
 * resolved (a cancel, a sweep: never the worker's own report, which goes through resolveTask), and announce groups
 * that resolved.
 */
export async function applyChange(
  db: Queryable,
  config: Config,
  taskIds: string[],
  change: (row: TaskRow) => OutboxMessage[] | undefined,
): Promise<{ statuses: TaskStatus[]; changed: TaskRow[] }> {
  const rows = await loadTasks(db, [...new Set(taskIds)], 'update');
  const changed: TaskRow[] = [];
  const messages: OutboxMessage[] = [];
  const taken: ResolvedRun[] = [];
  for (const row of rows) {
    const running = row.state === 'running' ? row.runs[row.runs.length - 1] : undefined;
    const produced = change(row);
    if (produced === undefined) continue;
    changed.push(row);
    messages.push(...produced);
    const after = running && row.runs[running.runId];
    if (after && after.state !== 'running') taken.push({ taskId: row.task_id, runId: running.runId, reasonResolved: after.reasonResolved ?? after.state });
  }
  await saveTasks(db, changed);
  for (let i = 0; i < messages.length; i += 2000) await enqueueMessages(db, messages.slice(i, i + 2000));
  await notifyPending(db, changed.filter((r) => r.state === 'pending').map((r) => `${r.provisioner_id}/${r.worker_type}`));
  await notifyRunsResolved(db, taken);
  const resolvedGroups = changed.filter((r) => r.state !== 'pending' && r.state !== 'running').map((r) => r.task_group_id);
  await resolveTaskGroupsIfDone(db, config, resolvedGroups);
  return { statuses: rows.map(taskStatus), changed };
}
