import type pg from 'pg';
import { notifyAfterCommit } from '../db/pool.js';
import { OUTBOX_CHANNEL } from '../exchanges/outbox.js';
import { TASK_COLUMNS } from './taskRow.js';

const CHUNK = 5000;

/**
 * Each task's task-defined message, written to the outbox in the caller's transaction as the stored row for the
 * relay to render (src/exchanges/relay.ts), 5,000 tasks a statement. For the graph intake: its tasks are
 * written in chunks as the body arrives, and the graph's routing may arrive after them, so their messages are
 * made from the rows as they finally are. The message id is the one taskMessage gives a task-defined message.
 */
export async function announceDefined(client: pg.PoolClient, taskIds: Iterable<string>): Promise<void> {
  let chunk: string[] = [];
  const write = async () => {
    await client.query(
      `INSERT INTO outbox (message_id, exchange, routing_key, payload, render)
       SELECT c.task_id || '/_/task-defined/' || jsonb_array_length(c.runs), '', '', jsonb_build_object('row', to_jsonb(c)), 'task-defined'
       FROM (SELECT ${TASK_COLUMNS} FROM tasks WHERE task_id = ANY($1)) c`,
      [chunk],
    );
    chunk = [];
  };
  for (const id of taskIds) {
    chunk.push(id);
    if (chunk.length >= CHUNK) await write();
  }
  if (chunk.length > 0) await write();
  await notifyAfterCommit(client, OUTBOX_CHANNEL, ['']);
}
