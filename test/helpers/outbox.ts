import type pg from 'pg';
import type { Config } from '../../src/config.js';
import { DEFERRED_COLUMNS, OUTBOX_COLUMNS, type OutboxRow } from '../../src/exchanges/outboxStore.js';
import { outboxMessage } from '../../src/exchanges/outboxMessage.js';

/**
 * The outbox as the relay would publish it (rows written for rendering are rendered): its deferred lane (a graph's
 * task-defined messages) first, then the outbox, each in id order. Every task's deferred message goes out ahead of
 * its other messages, so this is each task's order.
 */
export async function renderedOutbox(pool: pg.Pool, config: Config) {
  const { rows } = await pool.query<OutboxRow>(
    `SELECT * FROM (SELECT ${DEFERRED_COLUMNS}, true AS deferred FROM outbox_deferred
                    UNION ALL SELECT ${OUTBOX_COLUMNS}, false FROM outbox) m ORDER BY deferred DESC, id`,
  );
  return rows.map((row) => outboxMessage(config, row));
}
