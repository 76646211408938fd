import { notifyAfterCommit, type Queryable } from '../db/pool.js';

/** Channel the claim waiters LISTEN on; the payload is `<provisionerId>/<workerType>`. */
export const PENDING_CHANNEL = 'tgs_task_pending';

/** Wakes claimWork callers waiting on these queues, once the transaction has committed. */
export async function notifyPending(db: Queryable, taskQueueIds: Iterable<string>): Promise<void> {
  await notifyAfterCommit(db, PENDING_CHANNEL, taskQueueIds);
}
