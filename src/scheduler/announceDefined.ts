import type pg from 'pg';
import { notifyAfterCommit } from '../db/pool.js';
import { DEFERRED_CHANNEL } from '../exchanges/outbox.js';

const CHUNK = 5000;

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
 * The task-defined message of each task of graph nodes idx `fromIdx` .. `toIdx`-1, written to the outbox's deferred
 * lane (migration 021) in the caller's transaction for the relay to render (src/exchanges/relay.ts), in idx order,
 * 5,000 nodes a statement: thousands of them must not hold up the messages written after them. For the graph intake:
 * its tasks are written in chunks as the body arrives, and the graph's routing may arrive after them, so their
 * messages are made from the rows as they finally are, and the taskIds are read where they are stored rather than
 * held by the API.
 */
export async function announceDefined(client: pg.PoolClient, taskGraphId: string, fromIdx: number, toIdx: number): Promise<void> {
  for (let from = fromIdx; from < toIdx; from += CHUNK) {
    await client.query(
      deferredDefinedInsert('SELECT task_id FROM graph_nodes WHERE task_graph_id = $1 AND idx >= $2 AND idx < $3 ORDER BY idx'),
      [taskGraphId, from, Math.min(from + CHUNK, toIdx)],
    );
  }
  await notifyAfterCommit(client, DEFERRED_CHANNEL, ['']);
}
