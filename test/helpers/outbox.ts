import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { loadConfig, type Config } from '../../src/config.js';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';
import { DEFERRED_COLUMNS, OUTBOX_COLUMNS, type OutboxRow } from '../../src/relay/outboxStore.js';
import { outboxMessage } from '../../src/relay/outboxMessage.js';

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

/** A fresh database for a test file of the relay, and a configuration on it whose exchanges no other file uses. */
export async function relayTestDatabase(): Promise<{ db: TestDatabase; config: Config }> {
  const db = await createTestDatabase();
  return { db, config: loadConfig({}, { databaseUrl: db.url, exchangePrefix: `test-${randomBytes(4).toString('hex')}/` }) };
}
