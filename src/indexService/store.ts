import type { Queryable } from '../db/pool.js';
import { joinNamespace, NAMESPACE, splitNamespace } from './namespace.js';

/**
 * The index's tables (migration 022): `indexed_tasks` (an entry per index path) and `index_namespaces` (the
 * namespaces above the entries). Every query of them is here. These functions take any Queryable (a pool, or a
 * transaction's client), so an activity can use them as the API does.
 */

/** An entry as Taskcluster's indexed-task-response has it; `namespace` is the full index path. */
export interface IndexedTask {
  namespace: string;
  taskId: string;
  rank: number;
  data: Record<string, unknown>;
  expires: string;
}

/** A namespace as Taskcluster's list-namespaces-response has it; `namespace` is its full path. */
export interface IndexNamespace {
  namespace: string;
  name: string;
  expires: string;
}

interface EntryRow {
  namespace: string;
  name: string;
  rank: number;
  task_id: string;
  data: Record<string, unknown>;
  expires: Date;
}

const ENTRY_COLUMNS = 'namespace, name, rank, task_id, data, expires';

const toEntry = (row: EntryRow): IndexedTask => ({
  namespace: joinNamespace(row.namespace, row.name),
  taskId: row.task_id,
  rank: row.rank,
  data: row.data,
  expires: row.expires.toISOString(),
});

/**
 * The upsert every write of the index goes through, from `source`: a query of rows (namespace, name, rank, task_id,
 * data, expires, ord). The rank rule, Taskcluster's: an entry is replaced by one of higher or equal rank, never by
 * a lower one (an expired entry not yet swept counts as absent), except under `tgs.cache.`, where the latest write always wins (a cache entry's rank is fixed, src/indexService/completions.ts, so `refresh` overwrites). Rows of one path in one call (two completions of a
 * relay batch) leave the highest rank, and of equal ranks the latest `ord`: the same as writing them one by one
 * in order, in one statement (ON CONFLICT may not touch a row twice). The namespaces above every entry written are
 * created or have their expiry moved up to the entry's, rounded up to the next midnight (UTC; within year 9999). Rows are written
 * in key order so two writers lock them in the same order. `written` holds the entries written.
 */
export const upsertStatement = (source: string) => `WITH src AS (${source}),
  picked AS (SELECT DISTINCT ON (namespace, name) namespace, name, rank, task_id, data, expires FROM src
              ORDER BY namespace, name, rank DESC, ord DESC),
  written AS (
    INSERT INTO indexed_tasks AS t (${ENTRY_COLUMNS})
    SELECT ${ENTRY_COLUMNS} FROM picked ORDER BY namespace, name
    ON CONFLICT (namespace, name) DO UPDATE
       SET rank = EXCLUDED.rank, task_id = EXCLUDED.task_id, data = EXCLUDED.data, expires = EXCLUDED.expires
     WHERE t.rank <= EXCLUDED.rank OR t.expires <= now() OR t.namespace LIKE 'tgs.cache.%'
    RETURNING t.namespace, t.name, t.rank, t.task_id, t.data, t.expires),
  parts AS (
    SELECT array_to_string(s.p[1:i - 1], '.') AS parent, s.p[i] AS name,
           -- capped at the last date-time of year 9999, the latest a Taskcluster date-time can be
           max(LEAST(date_trunc('day', w.expires, 'UTC') + interval '1 day', timestamptz '9999-12-31 23:59:59.999+00')) AS expires
      FROM written w
      CROSS JOIN LATERAL (SELECT string_to_array(w.namespace, '.') AS p) s
      CROSS JOIN LATERAL generate_subscripts(s.p, 1) AS i
     WHERE w.namespace <> ''
     GROUP BY 1, 2),
  namespaces AS (
    INSERT INTO index_namespaces AS n (parent, name, expires)
    SELECT parent, name, expires FROM parts ORDER BY parent, name
    ON CONFLICT (parent, name) DO UPDATE SET expires = EXCLUDED.expires WHERE n.expires < EXCLUDED.expires)`;

/** What a caller indexes a task with (insertTask's body). */
export interface IndexEntryInput {
  taskId: string;
  rank: number;
  data: Record<string, unknown>;
  /** A date-time, or a Date. */
  expires: string | Date;
}

const UPSERT_ONE = `${upsertStatement(
  'SELECT $1::text AS namespace, $2::text AS name, $3::float8 AS rank, $4::text AS task_id, $5::jsonb AS data, $6::timestamptz AS expires, 1 AS ord',
)}
  SELECT ${ENTRY_COLUMNS} FROM written
  UNION ALL
  SELECT ${ENTRY_COLUMNS} FROM indexed_tasks WHERE namespace = $1 AND name = $2 AND NOT EXISTS (SELECT FROM written)`;

/**
 * Indexes `taskId` at `path` with the rank rule (upsertStatement) and answers the entry the path holds afterwards:
 * the one given, or the one of higher rank that stayed (Taskcluster's insertTask answers that one too).
 * `path` must be a valid index path (checkNamespace).
 */
export async function upsertIndexedTask(db: Queryable, path: string, entry: IndexEntryInput): Promise<IndexedTask> {
  const [namespace, name] = splitNamespace(path);
  const expires = entry.expires instanceof Date ? entry.expires.toISOString() : entry.expires;
  const { rows } = await db.query<EntryRow>(UPSERT_ONE, [namespace, name, entry.rank, entry.taskId, JSON.stringify(entry.data), expires]);
  return toEntry(rows[0]);
}

/** The entry at `path`, unless there is none or it expired: {namespace (the path), taskId, rank, data, expires}. */
export async function findTask(db: Queryable, path: string): Promise<IndexedTask | undefined> {
  const [namespace, name] = splitNamespace(path);
  const { rows } = await db.query<EntryRow>(
    `SELECT ${ENTRY_COLUMNS} FROM indexed_tasks WHERE namespace = $1 AND name = $2 AND expires > now()`,
    [namespace, name],
  );
  return rows[0] ? toEntry(rows[0]) : undefined;
}

/**
 * The unexpired entries at any of `paths` (valid index paths, no two alike), in path order after the path `after`
 * (keyset paging over the request's paths); at most `limit`. A path with no entry, or an expired one, is absent.
 * One primary-key probe a path.
 */
export async function findTasksAt(db: Queryable, paths: string[], after: string, limit: number): Promise<IndexedTask[]> {
  const split = paths.map(splitNamespace);
  const { rows } = await db.query<EntryRow & { path: string }>(
    `SELECT ${ENTRY_COLUMNS} FROM (
       SELECT t.*, CASE WHEN t.namespace = '' THEN t.name ELSE t.namespace || '.' || t.name END AS path
         FROM unnest($1::text[], $2::text[]) AS p(namespace, name)
         JOIN indexed_tasks t ON t.namespace = p.namespace AND t.name = p.name
        WHERE t.expires > now()) found
     WHERE path > $3 ORDER BY path LIMIT $4`,
    [split.map(([namespace]) => namespace), split.map(([, name]) => name), after, limit],
  );
  return rows.map(toEntry);
}

/** Removes the entry at `path` (the namespaces above it stay, as in Taskcluster). Whether there was one. */
export async function deleteIndexedTask(db: Queryable, path: string): Promise<boolean> {
  const [namespace, name] = splitNamespace(path);
  const { rowCount } = await db.query('DELETE FROM indexed_tasks WHERE namespace = $1 AND name = $2', [namespace, name]);
  return (rowCount ?? 0) > 0;
}

/** Removes every entry directly in `namespace` (a cache purge by name: src/scheduler/api/cache.ts). How many there were. */
export async function deleteIndexedTasksIn(db: Queryable, namespace: string): Promise<number> {
  const { rowCount } = await db.query('DELETE FROM indexed_tasks WHERE namespace = $1', [namespace]);
  return rowCount ?? 0;
}

/**
 * The unexpired entries directly in `namespace` ('' is the root), by name, after the name `after` (keyset paging:
 * a page never repeats or skips an entry that stays, whatever is written meanwhile); at most `limit`.
 */
export async function listTasks(db: Queryable, namespace: string, after: string, limit: number): Promise<Array<IndexedTask & { name: string }>> {
  const { rows } = await db.query<EntryRow>(
    `SELECT ${ENTRY_COLUMNS} FROM indexed_tasks WHERE namespace = $1 AND name > $2 AND expires > now() ORDER BY name LIMIT $3`,
    [namespace, after, limit],
  );
  return rows.map((row) => ({ ...toEntry(row), name: row.name }));
}

/** The unexpired namespaces directly in `parent` ('' is the root), by name, after `after`; at most `limit`. */
export async function listNamespaces(db: Queryable, parent: string, after: string, limit: number): Promise<IndexNamespace[]> {
  const { rows } = await db.query<{ name: string; expires: Date }>(
    'SELECT name, expires FROM index_namespaces WHERE parent = $1 AND name > $2 AND expires > now() ORDER BY name LIMIT $3',
    [parent, after, limit],
  );
  return rows.map((row) => ({ namespace: joinNamespace(parent, row.name), name: row.name, expires: row.expires.toISOString() }));
}

const EXPIRY_BATCH = 500;

/**
 * The expiry sweep's part for the index (src/queue/sweeps.ts runs it): deletes up to 500 expired entries and 500
 * expired namespaces; answers the larger count, so the sweep goes on while a batch was full.
 */
export async function expireIndex(db: Queryable): Promise<number> {
  const { rows } = await db.query<{ tasks: number; namespaces: number }>(
    `WITH t AS (DELETE FROM indexed_tasks WHERE (namespace, name) IN
                  (SELECT namespace, name FROM indexed_tasks WHERE expires < now() ORDER BY expires LIMIT ${EXPIRY_BATCH}) RETURNING 1),
          n AS (DELETE FROM index_namespaces WHERE (parent, name) IN
                  (SELECT parent, name FROM index_namespaces WHERE expires < now() ORDER BY expires LIMIT ${EXPIRY_BATCH}) RETURNING 1)
     SELECT (SELECT count(*) FROM t)::int AS tasks, (SELECT count(*) FROM n)::int AS namespaces`,
  );
  return Math.max(rows[0].tasks, rows[0].namespaces);
}

/** The namespace pattern as a SQL string literal (Postgres' regular expressions read it the same way). */
export const NAMESPACE_SQL_PATTERN = `'${NAMESPACE.source.replace(/'/g, "''")}'`;
