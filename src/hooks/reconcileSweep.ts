import type pg from 'pg';
import type { Config } from '../config.js';
import { withTransaction } from '../db/pool.js';
import type { LazyTemporalClient } from '../temporal/connection.js';
import { reconcileHookSchedules } from './schedules.js';
import { tryLockForReconcile } from './scheduleLock.js';

/** After a reconciliation that succeeded, the next is this much later (an API start always runs one first). */
const RECONCILE_EVERY_MS = 10 * 60 * 1000;

/**
 * The API's `hook schedules` sweep: at the first sweep after the API starts, and every 10 minutes after, makes
 * Temporal's hook schedules match the `hooks` table (src/hooks/schedules.ts). Until it succeeds (Temporal away, a
 * hook write in flight) it is tried at every sweep. Returns how many schedules it changed.
 */
export function hookScheduleSweep(pool: pg.Pool, config: Config, temporal: LazyTemporalClient, log?: (line: string) => void): () => Promise<number> {
  let lastDone = 0;
  return async () => {
    if (Date.now() - lastDone < RECONCILE_EVERY_MS) return 0;
    const client = await temporal.get();
    const changed = await withTransaction(pool, async (db) => {
      if (!(await tryLockForReconcile(db))) return undefined;
      return reconcileHookSchedules(db, client, config);
    });
    if (!changed) return 0;
    lastDone = Date.now();
    const total = changed.created + changed.updated + changed.deleted;
    if (total > 0) log?.(`hook schedules reconciled with Temporal: ${changed.created} created, ${changed.updated} updated, ${changed.deleted} deleted`);
    return 0;
  };
}
