import { notifyAfterCommit, type Queryable } from '../db/pool.js';

/** Channel the claim waiters LISTEN on; the payload is `<provisionerId>/<workerType>`. */
export const PENDING_CHANNEL = 'tgs_task_pending';

/**
 * Channel of claimed runs resolved by someone other than their worker (a cancel, the deadline and claim-expiry
 * sweeps): the API's worker streams LISTEN on it (the claim waiter's session) and tell the worker that holds such a
 * run at once (the `canceled` frame, docs/api.md § The worker stream). The payload is runs as
 * `<taskId>/<runId>/<reasonResolved>`, separated by spaces.
 */
export const RUNS_RESOLVED_CHANNEL = 'tgs_run_resolved';

/** Postgres refuses a NOTIFY payload of 8000 bytes or more: a chunk stays below this. */
export const MAX_NOTIFY_PAYLOAD = 7900;

/** Wakes claimWork callers waiting on these queues, once the transaction has committed. */
export async function notifyPending(db: Queryable, taskQueueIds: Iterable<string>): Promise<void> {
  await notifyAfterCommit(db, PENDING_CHANNEL, taskQueueIds);
}

/** A running run that someone other than its worker resolved. */
export interface ResolvedRun {
  taskId: string;
  runId: number;
  reasonResolved: string;
}

/** The payloads of RUNS_RESOLVED_CHANNEL for `runs`: as few as fit, each under MAX_NOTIFY_PAYLOAD bytes. */
export function runsResolvedPayloads(runs: ResolvedRun[]): string[] {
  const payloads: string[] = [];
  let current = '';
  for (const r of runs) {
    const entry = `${r.taskId}/${r.runId}/${r.reasonResolved}`;
    if (current && Buffer.byteLength(current) + 1 + Buffer.byteLength(entry) > MAX_NOTIFY_PAYLOAD) {
      payloads.push(current);
      current = '';
    }
    current = current ? `${current} ${entry}` : entry;
  }
  if (current) payloads.push(current);
  return payloads;
}

const ENTRY = /^([A-Za-z0-9_-]{1,64})\/(\d{1,6})\/([a-z-]{1,64})$/;

/** The runs of one RUNS_RESOLVED_CHANNEL payload; an entry not of the shape is skipped. */
export function parseRunsResolved(payload: string): ResolvedRun[] {
  const runs: ResolvedRun[] = [];
  for (const entry of payload.split(' ')) {
    const m = ENTRY.exec(entry);
    if (m) runs.push({ taskId: m[1], runId: Number(m[2]), reasonResolved: m[3] });
  }
  return runs;
}

/** Tells the worker streams of every API process about these runs, once the transaction has committed. */
export async function notifyRunsResolved(db: Queryable, runs: ResolvedRun[]): Promise<void> {
  if (runs.length > 0) await notifyAfterCommit(db, RUNS_RESOLVED_CHANNEL, runsResolvedPayloads(runs));
}
