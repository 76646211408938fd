import type { Queryable } from '../db/pool.js';
import type { CacheKeyInputs } from './key.js';
import type { CacheMode } from './spec.js';

/** The `task_cache` table (migration 027): every query of it is here. */

/** What one tier's lookup found (docs/formats.md § Cached tasks). */
export type TierResult = 'hit' | 'miss' | 'expired' | 'source-failed' | 'expires-before-deadline' | 'artifact-expires';

export interface TierLookup {
  tier: string;
  result: TierResult;
  /** the entry's task, when there was one */
  taskId?: string;
}

/** Where a hit's run came from: in the run (`runs[n].cachedFrom`), the lookup's row and the UI. */
export interface CachedFrom {
  taskId: string;
  runId: number;
  key: string;
  tier: string;
}

export interface CacheRow {
  taskId: string;
  taskGraphId: string;
  label: string;
  name: string;
  tier: string;
  key: string;
  inputs: CacheKeyInputs;
  mode: CacheMode;
  maxAgeS: number | undefined;
  neededUntil: string;
  lookup?: TierLookup[];
  lookedUp?: string;
  cachedFrom?: CachedFrom;
}

/** A row as Postgres answers it: the columns named as the interface's fields are the same, the rest in snake case. */
interface Row extends Pick<CacheRow, 'label' | 'name' | 'tier' | 'key' | 'inputs' | 'mode'> {
  task_id: string;
  task_graph_id: string;
  max_age_s: number | null;
  needed_until: Date;
  lookup: TierLookup[] | null;
  looked_up: Date | null;
  cached_from: CachedFrom | null;
}

const fromRow = ({ label, name, tier, key, inputs, mode, ...r }: Row): CacheRow => ({
  taskId: r.task_id,
  taskGraphId: r.task_graph_id,
  ...{ label, name, tier, key, inputs, mode },
  maxAgeS: r.max_age_s ?? undefined,
  neededUntil: r.needed_until.toISOString(),
  ...(r.lookup ? { lookup: r.lookup } : {}),
  ...(r.looked_up ? { lookedUp: r.looked_up.toISOString() } : {}),
  ...(r.cached_from ? { cachedFrom: r.cached_from } : {}),
});

/** The rows of a graph's new cached nodes, written with their tasks (src/scheduler/graphIntake.ts). */
export async function insertCacheRows(db: Queryable, rows: CacheRow[]): Promise<void> {
  for (let i = 0; i < rows.length; i += 2000) {
    const chunk = rows.slice(i, i + 2000).map(({ label, name, tier, key, inputs, mode, ...r }) => ({
      task_id: r.taskId,
      task_graph_id: r.taskGraphId,
      ...{ label, name, tier, key, inputs, mode },
      max_age_s: r.maxAgeS ?? null,
      needed_until: r.neededUntil,
    }));
    await db.query(
      `INSERT INTO task_cache (task_id, task_graph_id, label, name, tier, key, inputs, mode, max_age_s, needed_until)
       SELECT task_id, task_graph_id, label, name, tier, key, inputs, mode, max_age_s, needed_until
         FROM jsonb_to_recordset($1::jsonb) AS v(task_id text, task_graph_id text, label text, name text, tier text, key text,
                                                  inputs jsonb, mode text, max_age_s int, needed_until timestamptz)`,
      [JSON.stringify(chunk)],
    );
  }
}

/** SQL for another table's statement to ask in passing: whether the task `taskIdSql` names has a row here (a cached node). */
export const hasCacheRowSql = (taskIdSql: string) => `EXISTS (SELECT 1 FROM task_cache c WHERE c.task_id = ${taskIdSql})`;

/** The cache rows of these tasks (those that have one). */
export async function cacheRows(db: Queryable, taskIds: string[]): Promise<CacheRow[]> {
  if (taskIds.length === 0) return [];
  const { rows } = await db.query<Row>('SELECT * FROM task_cache WHERE task_id = ANY($1::text[])', [taskIds]);
  return rows.map(fromRow);
}

/** A task's cache row, or undefined. */
export async function cacheRow(db: Queryable, taskId: string): Promise<CacheRow | undefined> {
  return (await cacheRows(db, [taskId]))[0];
}

/** The cache row of a graph's label, or undefined. */
export async function cacheRowByLabel(db: Queryable, taskGraphId: string, label: string): Promise<CacheRow | undefined> {
  const { rows } = await db.query<Row>('SELECT * FROM task_cache WHERE task_graph_id = $1 AND label = $2', [taskGraphId, label]);
  return rows[0] ? fromRow(rows[0]) : undefined;
}

/** Which of these tasks have rows, with their keys (an extend's new nodes may require existing cached ones). */
export async function cacheKeysOf(db: Queryable, taskIds: string[]): Promise<Map<string, string>> {
  if (taskIds.length === 0) return new Map();
  const { rows } = await db.query<{ task_id: string; key: string }>('SELECT task_id, key FROM task_cache WHERE task_id = ANY($1::text[])', [taskIds]);
  return new Map(rows.map((r) => [r.task_id, r.key]));
}

/** An extend's new dependents of existing cached nodes: their sources must now last until the new deadlines too. */
export async function extendNeededUntil(db: Queryable, needed: { taskId: string; until: string }[]): Promise<void> {
  if (needed.length === 0) return;
  await db.query(
    `UPDATE task_cache c SET needed_until = greatest(c.needed_until, v.until)
       FROM jsonb_to_recordset($1::jsonb) AS v(task_id text, until timestamptz) WHERE c.task_id = v.task_id`,
    [JSON.stringify(needed.map((n) => ({ task_id: n.taskId, until: n.until })))],
  );
}

/** Records what a lookup found, in the transaction that acted on it. */
export async function recordLookups(db: Queryable, lookups: { taskId: string; lookup: TierLookup[]; cachedFrom?: CachedFrom }[]): Promise<void> {
  if (lookups.length === 0) return;
  await db.query(
    `UPDATE task_cache c SET lookup = v.lookup, looked_up = now(), cached_from = v.cached_from
       FROM jsonb_to_recordset($1::jsonb) AS v(task_id text, lookup jsonb, cached_from jsonb) WHERE c.task_id = v.task_id`,
    [JSON.stringify(lookups.map((l) => ({ task_id: l.taskId, lookup: l.lookup, cached_from: l.cachedFrom ?? null })))],
  );
}
