import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { createPool } from '../../src/db/pool.js';
import { MIGRATION_LOCK, migrate } from '../../src/db/migrate.js';
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
  // 100 ms: a SHOW never takes that long even on a loaded machine (1 ms did, in CI), and a wait made longer on purpose does.
  process.env.TGS_PG_STATEMENT_TIMEOUT_MS = '100';
  process.env.TGS_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS = '60000';
  const pool = createPool(db.url, 2);
  const holder = createPool(db.url, 1);
  try {
    assert.equal((await pool.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0].statement_timeout, '100ms');
    assert.equal((await pool.query<{ idle_in_transaction_session_timeout: string }>('SHOW idle_in_transaction_session_timeout')).rows[0].idle_in_transaction_session_timeout, '1min');
    await assert.rejects(pool.query('SELECT pg_sleep(0.5)'), { code: '57014' }, 'Postgres cancels a longer statement');
    // Another process holds the migration lock for 600 ms: migrate's wait for it is one statement six times the
    // timeout, so it is cancelled unless the migration session lifts the timeout.
    const held = await holder.connect();
    await held.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    const started = Date.now();
    const release = new Promise<void>((resolve) => setTimeout(() => {
      void held.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).finally(() => { held.release(); resolve(); });
    }, 600));
    const applied = await migrate(pool);
    await release;
    assert.ok(applied.length > 10, 'the migrations ran');
    assert.ok(Date.now() - started >= 550, 'migrate waited for the lock');
    assert.equal((await pool.query<{ statement_timeout: string }>('SHOW statement_timeout')).rows[0].statement_timeout, '100ms', 'the session has its timeout back');
  } finally {
    await pool.end();
    await holder.end();
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
