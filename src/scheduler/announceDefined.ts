import type pg from 'pg';
import { notifyAfterCommit } from '../db/pool.js';
import { DEFERRED_CHANNEL } from '../exchanges/outbox.js';

/**
 * SQL: writes to the outbox's deferred lane the task-defined message of each task whose id `taskIds` (a query with a
 * `task_id` column) returns, in the order it returns them. Only the taskId and the message id are stored (the one
 * taskMessage gives a task-defined message: the task has no run yet); the relay renders the message from the task's
 * row as it was defined (taskAsDefinedSql, src/queue/taskRow.ts) when it publishes it. Storing a copy of each row
 * instead cost a 20,000-task graph's submit a tenth of its Postgres CPU and of its time (bench/submitCpu.ts,
 * alternated runs: 0.100-0.111 ms of Postgres CPU a task and 2.82-2.99 s against 0.092-0.094 ms and 2.56-2.65 s).
 */
export const deferredDefinedInsert = (taskIds: string) => `INSERT INTO outbox_deferred (task_id, message_id, render)
  SELECT c.task_id, c.task_id || '/_/task-defined/0', 'task-defined' FROM (${taskIds}) c`;

/**
 * The task-defined messages of a graph's new tasks (`taskIds`, in their order), written to the outbox's deferred lane
 * (migration 021) in the caller's transaction for the relay to render (src/relay/relay.ts): thousands of them must
 * not hold up the messages written after them. For the graph intake, one chunk at a time as it writes the chunk's
 * tasks: the graph's routing may arrive after them, but the relay renders each message from the row as it is once
 * committed, so nothing of the row is copied now.
 */
export async function announceDefined(client: pg.PoolClient, taskIds: string[]): Promise<void> {
  if (taskIds.length === 0) return;
  await client.query(deferredDefinedInsert('SELECT u.task_id FROM unnest($1::text[]) WITH ORDINALITY AS u(task_id, n) ORDER BY u.n'), [taskIds]);
  await notifyAfterCommit(client, DEFERRED_CHANNEL, ['']);
}
