import type pg from 'pg';
import type { Config } from '../config.js';

/**
 * The API's `hook last fires` sweep: a hook's recorded fires (`hook_last_fires`, listLastFires) are kept
 * TGS_HOOK_LAST_FIRES_DAYS (30) days and at most TGS_HOOK_LAST_FIRES_MAX (1000) a hook, newest kept. Before, they were
 * never deleted, and every schedule time and trigger added one (security review 2026-11-28, finding 10). What this
 * gives up: a fire's row is also how a retried schedule or a redelivered message knows it fired, so a retry or
 * backfill of a time whose row is gone fires again (a backfill reaches back at most 1000 times; a message is
 * redelivered within minutes). At most 10,000 rows a sweep, one sweep every 10 minutes (the window over every fire
 * reads the whole table, by the (hook, time) index).
 */
const EVERY_MS = 10 * 60 * 1000;
const BATCH = 10_000;

export const EXPIRE_LAST_FIRES = `
  DELETE FROM hook_last_fires WHERE ctid IN (
    SELECT ctid FROM (
      SELECT ctid, task_create_time,
             row_number() OVER (PARTITION BY hook_group_id, hook_id ORDER BY task_create_time DESC, task_id DESC) AS n
        FROM hook_last_fires) f
     WHERE f.n > $2 OR f.task_create_time < now() - make_interval(days => $1)
     LIMIT ${BATCH})`;

export async function expireLastFires(db: Pick<pg.Pool, 'query'>, config: Pick<Config, 'hookLastFiresDays' | 'hookLastFiresMax'>): Promise<number> {
  const { rowCount } = await db.query(EXPIRE_LAST_FIRES, [config.hookLastFiresDays, config.hookLastFiresMax]);
  return rowCount ?? 0;
}

/** The sweep: at the API's first sweep, then every 10 minutes, and again at once while a batch was full. */
export function lastFiresSweep(pool: pg.Pool, config: Config): () => Promise<number> {
  let lastDone = 0;
  return async () => {
    if (Date.now() - lastDone < EVERY_MS) return 0;
    const deleted = await expireLastFires(pool, config);
    if (deleted < BATCH) lastDone = Date.now();
    return deleted;
  };
}
