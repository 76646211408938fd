import type pg from 'pg';
import type { Config } from '../../src/config.js';
import { outboxMessage, type OutboxRow } from '../../src/exchanges/relay.js';

/** The outbox as the relay would publish it (rows written for rendering are rendered), in id order. */
export async function renderedOutbox(pool: pg.Pool, config: Config) {
  const { rows } = await pool.query<OutboxRow>('SELECT id, message_id, exchange, routing_key, cc, payload, render FROM outbox ORDER BY id');
  return rows.map((row) => outboxMessage(config, row));
}
