import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createPool } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';

let db: TestDatabase;
before(async () => {
  db = await createTestDatabase({ migrate: false });
});
after(async () => {
  delete process.env.TGS_PG_STATEMENT_TIMEOUT_MS;
  delete process.env.TGS_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS;
  await db.drop();
});

test('TGS_PG_STATEMENT_TIMEOUT_MS and TGS_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS become the pooled sessions\' Postgres timeouts; migrations are exempt', async () => {
  process.env.TGS_PG_STATEMENT_TIMEOUT_MS = '1';
  process.env.TGS_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS = '60000';
  const pool = createPool(db.url, 2);
  try {
    assert.equal((await pool.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0].statement_timeout, '1ms');
    assert.equal((await pool.query<{ idle_in_transaction_session_timeout: string }>('SHOW idle_in_transaction_session_timeout')).rows[0].idle_in_transaction_session_timeout, '1min');
    await assert.rejects(pool.query('SELECT pg_sleep(0.5)'), { code: '57014' }, 'Postgres cancels a longer statement');
    // every migration runs with the 1 ms timeout lifted (each takes longer than that)
    assert.ok((await migrate(pool)).length > 10);
    assert.equal((await pool.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0].statement_timeout, '1ms', 'the session has its timeout back');
  } finally {
    await pool.end();
  }
  delete process.env.TGS_PG_STATEMENT_TIMEOUT_MS;
  delete process.env.TGS_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS;
  const plain = createPool(db.url, 1);
  try {
    const { rows } = await plain.query<{ setting: string; source: string }>(`SELECT setting, source FROM pg_settings WHERE name = 'statement_timeout'`);
    assert.notEqual(rows[0].source, 'client', 'unset: the server\'s own setting');
  } finally {
    await plain.end();
  }
});
