import { readdir, readFile } from 'node:fs/promises';
import { fileURLToPath } from 'node:url';
import path from 'node:path';
import type pg from 'pg';
import { isPgliteUrl } from './pglite.js';

/** src/sql holds numbered migrations `NNN_name.sql`, shipped with the package (also from dist/). */
export const migrationsDir = fileURLToPath(new URL('../../src/sql/', import.meta.url));

// An arbitrary constant: every tgs process takes this advisory lock before migrating.
export const MIGRATION_LOCK = 7_471_020_231;

export interface Migration {
  id: number;
  name: string;
  sql: string;
}

export async function loadMigrations(dir = migrationsDir): Promise<Migration[]> {
  const files = (await readdir(dir)).filter((f) => /^\d{3}_[\w-]+\.sql$/.test(f)).sort();
  return Promise.all(
    files.map(async (file) => ({
      id: Number(file.slice(0, 3)),
      name: file.replace(/\.sql$/, ''),
      sql: await readFile(path.join(dir, file), 'utf8'),
    })),
  );
}

/**
 * Applies pending migrations, each in its own transaction with a row in the ledger `tgs_migrations`,
 * under an advisory lock so several processes starting at once migrate exactly once.
 * Returns the names applied.
 */
export async function migrate(pool: pg.Pool, log: (line: string) => void = () => undefined): Promise<string[]> {
  const migrations = await loadMigrations();
  const client = await pool.connect();
  const applied: string[] = [];
  let locked = false;
  try {
    // Waiting for another process's migrations and building indexes over whole tables take as long as they take:
    // TGS_PG_STATEMENT_TIMEOUT_MS is for the processes' own statements (RESET below gives the session its value back).
    await client.query('SET statement_timeout = 0');
    // Nothing pending: done without DDL or the lock. A deployment's tgs processes may connect as a role that may
    // only read and write rows (docs/deployments.md, "Postgres roles"); they start as long as `tgs migrate` ran.
    // Under a timeout of a millisecond or so, the timer Postgres armed for the SET itself can still fire during the
    // next statement (seen under load with TGS_PG_STATEMENT_TIMEOUT_MS=1): that read is made again once.
    const pending = await pendingMigrations(client, migrations).catch((err: { code?: string }) => {
      if (err.code === '57014') return pendingMigrations(client, migrations);
      throw err;
    });
    if (pending.length === 0) return [];
    await client.query('SELECT pg_advisory_lock($1)', [MIGRATION_LOCK]);
    locked = true;
    if (!(await ledgerExists(client))) {
      await asOwner(client, migrations, () =>
        client.query(`CREATE TABLE IF NOT EXISTS tgs_migrations (
          id integer PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`),
      );
    }
    const done = await appliedMigrations(client);
    for (const migration of migrations) {
      if (done.has(migration.id)) continue;
      try {
        await client.query('BEGIN');
        await asOwner(client, migrations, () => client.query(migration.sql));
        await client.query('INSERT INTO tgs_migrations (id, name) VALUES ($1, $2)', [migration.id, migration.name]);
        await client.query('COMMIT');
      } catch (err) {
        await client.query('ROLLBACK').catch(() => undefined);
        if (err instanceof MigrationPermissionError) throw err;
        throw new Error(`migration ${migration.name} failed: ${(err as Error).message}`);
      }
      applied.push(migration.name);
    }
    // one line for a first start's whole schema, not one per file (a failure above names its migration)
    if (applied.length) log(`applied ${applied.length} migration(s) (${applied.length > 1 ? `${applied[0]} … ${applied[applied.length - 1]}` : applied[0]})`);
  } finally {
    if (locked) await client.query('SELECT pg_advisory_unlock($1)', [MIGRATION_LOCK]).catch(() => undefined);
    await client.query('RESET statement_timeout').catch(() => undefined);
    client.release();
  }
  return applied;
}

async function ledgerExists(client: pg.PoolClient): Promise<boolean> {
  const { rows } = await client.query<{ exists: boolean }>(`SELECT to_regclass('tgs_migrations') IS NOT NULL AS exists`);
  return rows[0].exists;
}

/** The ids in the ledger; empty when there is no ledger yet (a fresh database). */
async function appliedMigrations(client: pg.PoolClient): Promise<Set<number>> {
  if (!(await ledgerExists(client))) return new Set();
  return new Set((await client.query<{ id: number }>('SELECT id FROM tgs_migrations')).rows.map((r) => r.id));
}

async function pendingMigrations(client: pg.PoolClient, migrations: Migration[]): Promise<Migration[]> {
  const done = await appliedMigrations(client);
  return migrations.filter((m) => !done.has(m.id));
}

/** A migration is pending and this session's role may not change the schema. */
export class MigrationPermissionError extends Error {}

/**
 * Runs a schema change; a refusal for lack of privilege (SQLSTATE 42501: "permission denied for schema", "must be owner
 * of table") becomes an error that names what is pending and what to do about it.
 */
async function asOwner<T>(client: pg.PoolClient, migrations: Migration[], change: () => Promise<T>): Promise<T> {
  try {
    return await change();
  } catch (err) {
    if ((err as { code?: string }).code !== '42501') throw err;
    await client.query('ROLLBACK').catch(() => undefined);
    const pending = await pendingMigrations(client, migrations).catch(() => migrations);
    const { rows } = await client.query<{ role: string }>('SELECT current_user AS role').catch(() => ({ rows: [{ role: '?' }] }));
    throw new MigrationPermissionError(
      `${pending.length} database migration(s) pending (${pending.map((m) => m.name).join(', ')}) and role ` +
        `${rows[0].role} may not change the schema (${(err as Error).message}): run \`tgs migrate\` as the owner role ` +
        '(DATABASE_URL naming the role that owns the schema), then start this process again (docs/deployments.md, "Postgres roles")',
    );
  }
}

/**
 * Creates the database of `databaseUrl` when it does not exist yet (a fresh machine has only `postgres`),
 * so `tgs dev` and `tgs api` work without a manual `createdb`.
 */
export async function ensureDatabase(databaseUrl: string, log: (line: string) => void = (l) => console.error(l)): Promise<void> {
  if (isPgliteUrl(databaseUrl)) return; // the embedded database is created when opened
  const { default: pgModule } = await import('pg');
  const probe = new pgModule.Client({ connectionString: databaseUrl });
  // a connection the server ends emits 'error'; unheard, that would kill the process (the call fails instead)
  probe.on('error', () => undefined);
  try {
    await probe.connect();
    await probe.end();
    return;
  } catch (err) {
    await probe.end().catch(() => undefined);
    if ((err as { code?: string }).code !== '3D000') throw err;
  }
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.slice(1));
  url.pathname = '/postgres';
  const admin = new pgModule.Client({ connectionString: url.toString() });
  admin.on('error', () => undefined);
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE "${name.replace(/"/g, '""')}"`);
    log(`created database ${name}`);
  } catch (err) {
    if ((err as { code?: string }).code !== '42P04') throw err; // created meanwhile by another process
  } finally {
    await admin.end();
  }
}
