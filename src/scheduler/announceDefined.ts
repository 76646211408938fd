import type pg from 'pg';
import { notifyAfterCommit } from '../db/pool.js';
import { DEFERRED_CHANNEL } from '../exchanges/outbox.js';
import { TASK_COLUMNS } from '../queue/taskRow.js';

const CHUNK = 5000;

/**
 * SQL: writes to the outbox's deferred lane the task-defined message of each row `tasks` (a query of TASK_COLUMNS)
 * returns, as the stored row for the relay to render, in the order `tasks` returns them. The message id is the one
 * taskMessage gives a task-defined message.
 */
export const deferredDefinedInsert = (tasks: string) => `INSERT INTO outbox_deferred (task_id, message_id, payload, render)
  SELECT c.task_id, c.task_id || '/_/task-defined/' || jsonb_array_length(c.runs), jsonb_build_object('row', to_jsonb(c)), 'task-defined'
  FROM (${tasks}) c`;

/**
 * The task-defined message of each task of graph nodes idx `fromIdx` .. `toIdx`-1, written to the outbox's deferred
 * lane (migration 021) in the caller's transaction as the stored row for the relay to render (src/exchanges/relay.ts),
 * 5,000 nodes a statement: thousands of them must not hold up the messages written after them. For the graph
 * intake: its tasks are written in chunks as the body arrives, and the graph's routing may arrive after them, so their
 * messages are made from the rows as they finally are, and the taskIds are read where they are stored rather than
 * held by the API.
 */
export async function announceDefined(client: pg.PoolClient, taskGraphId: string, fromIdx: number, toIdx: number): Promise<void> {
  for (let from = fromIdx; from < toIdx; from += CHUNK) {
    await client.query(
      deferredDefinedInsert(`SELECT ${TASK_COLUMNS} FROM tasks WHERE task_id IN (
         SELECT task_id FROM graph_nodes WHERE task_graph_id = $1 AND idx >= $2 AND idx < $3)`),
      [taskGraphId, from, Math.min(from + CHUNK, toIdx)],
    );
  }
  await notifyAfterCommit(client, DEFERRED_CHANNEL, ['']);
}
