import type { Queryable } from '../db/pool.js';

/** Channel the claim waiters LISTEN on; the payload is `<provisionerId>/<workerType>`. */
export const PENDING_CHANNEL = 'tgs_task_pending';

/** Wakes claimWork callers waiting on these queues (delivered when the transaction commits). */
export async function notifyPending(db: Queryable, taskQueueIds: Iterable<string>): Promise<void> {
  const unique = [...new Set(taskQueueIds)];
  if (unique.length === 0) return;
  await db.query(`SELECT pg_notify('${PENDING_CHANNEL}', q) FROM unnest($1::text[]) AS q`, [unique]);
}
