import type { Queryable } from '../db/pool.js';

/**
 * Hook writes and schedule reconciliation exclude each other: a write holds this lock shared in its transaction
 * (it writes the Temporal Schedule before it commits), reconciliation holds it exclusively, so it never sees a
 * schedule whose row is not committed yet and deletes or reverts it.
 */
const KEY = "hashtextextended('tgs/hook-schedules', 0)";

export async function lockForHookWrite(client: Queryable): Promise<void> {
  await client.query(`SELECT pg_advisory_xact_lock_shared(${KEY})`);
}

/** False while a hook write is in flight (reconciliation tries again later). */
export async function tryLockForReconcile(client: Queryable): Promise<boolean> {
  const { rows } = await client.query<{ ok: boolean }>(`SELECT pg_try_advisory_xact_lock(${KEY}) AS ok`);
  return rows[0].ok;
}
