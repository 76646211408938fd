import { randomUUID } from 'node:crypto';
import { notifyAfterCommit, prepared, type Queryable } from '../db/pool.js';

/** The channel the relay LISTENs on; written by enqueueMessages in the same transaction. */
export const OUTBOX_CHANNEL = 'tgs_outbox';

export interface OutboxMessage {
  /** Full exchange name, prefix included (see exchangeName in exchanges.ts). */
  exchange: string;
  routingKey: string;
  /** Extra routing keys (Taskcluster CC: `route.<route>` for each task route). */
  cc?: string[];
  payload: unknown;
  /** Stable id carried as the AMQP messageId; consumers dedupe on it. Random when omitted. */
  messageId?: string;
}

/**
 * Writes messages to the outbox. Call it with the client of the transaction that makes the state
 * change, so the change and its messages commit (or vanish) together: that is what makes the
 * exchanges lossless. The relay is woken right after the commit.
 */
/** Messages as the outbox's columns, for jsonb_to_recordset. */
export function outboxRows(messages: OutboxMessage[]) {
  return messages.map((m) => ({
    message_id: m.messageId ?? randomUUID(),
    exchange: m.exchange,
    routing_key: m.routingKey,
    cc: m.cc ?? [],
    payload: m.payload,
  }));
}

export async function enqueueMessages(db: Queryable, messages: OutboxMessage[]): Promise<void> {
  if (messages.length === 0) return;
  await db.query(prepared(
    `INSERT INTO outbox (message_id, exchange, routing_key, cc, payload)
     SELECT m.message_id, m.exchange, m.routing_key, m.cc, m.payload
     FROM jsonb_to_recordset($1::jsonb) AS m(message_id text, exchange text, routing_key text, cc text[], payload jsonb)`,
    [JSON.stringify(outboxRows(messages))],
  ));
  // The relay's wake-up goes out after the commit (see notifyAfterCommit).
  await notifyAfterCommit(db, OUTBOX_CHANNEL, ['']);
}
