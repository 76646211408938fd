import { randomUUID } from 'node:crypto';
import { notifyAfterCommit, prepared, type Queryable } from '../db/pool.js';

/** The channel the relay LISTENs on; enqueueMessages notifies it once the transaction has committed. */
export const OUTBOX_CHANNEL = 'tgs_outbox';
/** The channel of the outbox's deferred lane (outbox_deferred, migration 021): notified once its rows have committed. */
export const DEFERRED_CHANNEL = 'tgs_outbox_deferred';
/** An SQL expression: the messages the relay has not published yet, in the outbox and its deferred lane. */
export const UNPUBLISHED_COUNT = '((SELECT count(*) FROM outbox) + (SELECT count(*) FROM outbox_deferred))';

/** An SQL expression: the rows in outbox_dead_letters (the gauge tgs_outbox_dead_letters). */
export const DEAD_LETTER_COUNT = '(SELECT count(*) FROM outbox_dead_letters)';

export interface OutboxMessage {
  /** Full exchange name, prefix included (see queueExchangeName and schedulerExchangeName in exchanges.ts). */
  exchange: string;
  routingKey: string;
  /** Extra routing keys (Taskcluster CC: `route.<route>` for each task route). */
  cc?: string[];
  payload: unknown;
  /** Stable id carried as the AMQP messageId; consumers dedupe on it. Random when omitted. */
  messageId?: string;
}

/** Messages as the outbox's columns: the JSON that outboxInsert reads (its parameter). */
export function outboxRows(messages: OutboxMessage[]) {
  return messages.map((m) => ({
    message_id: m.messageId ?? randomUUID(),
    exchange: m.exchange,
    routing_key: m.routingKey,
    cc: m.cc ?? [],
    payload: m.payload,
  }));
}

/**
 * The INSERT of outboxRows' JSON (parameter `param`), in their order: outbox ids are the publish order. Shared
 * by enqueueMessages and the statements that write a state change and its messages at once (a report).
 */
export const outboxInsert = (param: string) => `INSERT INTO outbox (message_id, exchange, routing_key, cc, payload)
    SELECT m.message_id, m.exchange, m.routing_key, m.cc, m.payload
    FROM ROWS FROM (jsonb_to_recordset(${param}::jsonb) AS (message_id text, exchange text, routing_key text, cc text[], payload jsonb))
         WITH ORDINALITY AS m(message_id, exchange, routing_key, cc, payload, n)`;

/**
 * Writes messages to the outbox. Call it with the client of the transaction that makes the state
 * change, so the change and its messages commit (or vanish) together: that is what makes the
 * exchanges lossless. The relay is woken right after the commit.
 */
export async function enqueueMessages(db: Queryable, messages: OutboxMessage[]): Promise<void> {
  if (messages.length === 0) return;
  await db.query(prepared(`${outboxInsert('$1')} ORDER BY m.n`, [JSON.stringify(outboxRows(messages))]));
  // The relay's wake-up goes out after the commit (see notifyAfterCommit).
  await notifyAfterCommit(db, OUTBOX_CHANNEL, ['']);
}
