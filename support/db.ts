import pg from 'pg';
import { randomBytes } from 'node:crypto';
import slugid from 'slugid';
import { createPool, withTransaction } from '../src/db/pool.js';
import { migrate } from '../src/db/migrate.js';
import { UNPUBLISHED_COUNT } from '../src/exchanges/outbox.js';
import { insertNewTasks } from '../src/queue/createTasks.js';
import { validateTaskDefinition, type TaskDefinition } from '../src/queue/definition.js';
import { fastTask } from './graphs.js';

/** How many rows wait in the outbox and its deferred lane (the relay deletes each once RabbitMQ confirmed it). */
export async function outboxCount(pool: Pick<pg.Pool, 'query'>): Promise<number> {
  return Number((await pool.query<{ n: string }>(`SELECT ${UNPUBLISHED_COUNT} AS n`)).rows[0].n);
}

/** The Postgres server tests use (TGS_TEST_PG, else the local one); the database in it is created per test file. */
export const defaultPostgresUrl = () => process.env.TGS_TEST_PG || 'postgres://postgres@127.0.0.1:5432';

export interface TestDatabase {
  url: string;
  name: string;
  pool: pg.Pool;
  drop(): Promise<void>;
}

/**
 * A fresh, migrated database of its own for one test file: tests never see each other's rows. `postgresUrl`: the
 * server (no database name), by default defaultPostgresUrl().
 */
export async function createTestDatabase(options: { migrate?: boolean; postgresUrl?: string } = {}): Promise<TestDatabase> {
  const server = options.postgresUrl ?? defaultPostgresUrl();
  const name = `tgs_test_${process.pid}_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: `${server}/postgres` });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${name}`);
  await admin.end();
  const url = `${server}/${name}`;
  const pool = createPool(url, 20);
  if (options.migrate !== false) await migrate(pool);
  return {
    url,
    name,
    pool,
    async drop() {
      await pool.end();
      const c = new pg.Client({ connectionString: `${server}/postgres` });
      await c.connect();
      await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      await c.end();
    },
  };
}

/**
 * `count` pending tasks of one new group on tgs-test/`workerType`, shaped as the bench's fast tasks, stored as
 * createTask stores them (without its messages); then ANALYZE, so the planner sees them as autovacuum would show
 * them (`analyze: false`: the statistics stay as they were, as after a backlog arrived). Returns their taskIds.
 */
export async function insertPendingTasks(pool: pg.Pool, count: number, workerType: string, options: { analyze?: boolean } = {}): Promise<string[]> {
  const now = new Date();
  const taskGroupId = slugid.nice();
  const rows: { taskId: string; definition: TaskDefinition }[] = [];
  for (let i = 0; i < count; i++) {
    const taskId = slugid.nice();
    const checked = validateTaskDefinition({ ...fastTask(`t${i}`), workerType, taskGroupId }, taskId, now);
    if ('errors' in checked) throw new Error(checked.errors.join('; '));
    rows.push({ taskId, definition: checked.definition });
  }
  for (let i = 0; i < rows.length; i += 2000) {
    await withTransaction(pool, (client) => insertNewTasks(client, rows.slice(i, i + 2000), { scheduleIndependent: true, dependenciesKnown: true, now }));
  }
  if (options.analyze !== false) await pool.query('ANALYZE tasks');
  return rows.map((r) => r.taskId);
}
