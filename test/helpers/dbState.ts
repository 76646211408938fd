import type pg from 'pg';
import { outboxCount } from '../../support/db.js';
import type { TestApi } from '../../support/api.js';

/**
 * Tables a background process empties on its own: only their sequence counts (the relay deletes published
 * outbox rows and the graph signals Temporal accepted, so a row a refused request wrote could be gone before anyone
 * looks; its id could not).
 */
const DRAINED = new Set(['outbox', 'outbox_deferred', 'graph_signals']);

async function tableNames(pool: pg.Pool): Promise<string[]> {
  const { rows } = await pool.query<{ name: string }>(`SELECT tablename AS name FROM pg_tables WHERE schemaname = 'public' ORDER BY tablename`);
  return rows.map((r) => r.name).filter((name) => !DRAINED.has(name));
}

async function sequencePositions(pool: pg.Pool): Promise<Record<string, string>> {
  const { rows } = await pool.query<{ name: string; value: string | null }>(
    `SELECT 'sequence ' || sequencename AS name, last_value::text AS value FROM pg_sequences WHERE schemaname = 'public'`,
  );
  return Object.fromEntries(rows.map((r) => [r.name, r.value ?? 'unused']));
}

const quote = (name: string) => `"${name.replace(/"/g, '""')}"`;

/**
 * A fingerprint of every table of the database (md5 of all its rows) and every sequence's position: equal
 * fingerprints mean nothing was inserted, updated or deleted. Every table, not a list: a table a later
 * migration adds is covered too.
 */
export async function databaseFingerprint(pool: pg.Pool): Promise<Record<string, string>> {
  const tables = await tableNames(pool);
  const { rows } = await pool.query<{ name: string; hash: string }>(
    tables
      .map((t) => `SELECT '${t}' AS name, md5(coalesce(string_agg(x::text, E'\\n' ORDER BY x::text), '')) AS hash FROM ${quote(t)} x`)
      .join(' UNION ALL '),
  );
  return { ...Object.fromEntries(rows.map((r) => [r.name, r.hash])), ...(await sequencePositions(pool)) };
}

const countQueries = new WeakMap<pg.Pool, Promise<string>>();

/**
 * Row counts of every table and sequence positions, in one query (its text built once per pool): cheap
 * enough to take around each of thousands of fuzzed requests. Updates by background work (a graph's
 * workflow scheduling its tasks) leave counts alone; `sequences: false` also ignores ids drawn meanwhile.
 */
export async function databaseCounts(pool: pg.Pool, options: { sequences?: boolean } = {}): Promise<Record<string, string>> {
  let sql = countQueries.get(pool);
  if (!sql) {
    sql = tableNames(pool).then((tables) =>
      [
        ...tables.map((t) => `SELECT '${t}' AS name, count(*)::text AS n FROM ${quote(t)}`),
        `SELECT 'sequence ' || sequencename, coalesce(last_value::text, 'unused') FROM pg_sequences WHERE schemaname = 'public'`,
      ].join(' UNION ALL '),
    );
    countQueries.set(pool, sql);
  }
  const { rows } = await pool.query<{ name: string; n: string }>(await sql);
  const all = Object.fromEntries(rows.map((r) => [r.name, r.n]));
  if (options.sequences === false) for (const name of Object.keys(all)) if (name.startsWith('sequence ')) delete all[name];
  return all;
}

/**
 * `databaseCounts` of the API's database once its worker recorder wrote what it noted: an accepted request records
 * its task queue up to 2 s later (src/queue/workers.ts), which must not be blamed on the next request.
 */
export async function recordedCounts(t: TestApi): Promise<Record<string, string>> {
  await t.api.deps.workers.flush();
  return databaseCounts(t.db.pool);
}

/** Waits until the database stops changing (background work settled) and the outbox is drained. */
export async function databaseSettled(pool: pg.Pool, timeoutMs = 30_000): Promise<Record<string, string>> {
  const deadline = Date.now() + timeoutMs;
  let last = await databaseFingerprint(pool);
  for (;;) {
    await new Promise((r) => setTimeout(r, 300));
    const now = await databaseFingerprint(pool);
    if ((await outboxCount(pool)) === 0 && JSON.stringify(now) === JSON.stringify(last)) return now;
    if (Date.now() > deadline) throw new Error('the database did not settle');
    last = now;
  }
}
