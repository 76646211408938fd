import type { Queryable } from '../db/pool.js';

/**
 * Whether a task queue has workers, from what the queue itself recorded: the last claimWork on it (its workers'
 * lastDateActive, which only claimWork sets, written by the WorkerRecorder within 2 s of a call; not the task
 * queue's, which createTask sets too), the workers seen and their quarantine, the runs it holds
 * claimed now, and when its recent runs started. Never from poller presence alone: a worker busy with long tasks
 * does not call claimWork, yet it is there (the confusion behind false "no workers" alarms elsewhere).
 */
export interface QueueAvailability {
  taskQueueId: string;
  /** the last claimWork on the queue; null: no worker ever claimed from it */
  lastClaimWork: Date | null;
  /** runs of the queue running now under an unexpired claim, among its workers' latest 20 claims each */
  running: number;
  /** workers that called claimWork within the window, quarantined or not */
  recentWorkers: number;
  quarantinedWorkers: number;
  /** claims a minute over the recent runs of its workers, null when too few to tell */
  claimsPerMinute: number | null;
  /** what the queue's state means for a pending task there */
  verdict: 'no-workers' | 'quarantined' | 'workers-busy' | 'workers-polling';
}

/**
 * How long without a claimWork before a queue counts as having no workers: a worker with free capacity calls
 * claimWork at least every TGS_CLAIM_WORK_WAIT_MS (its long-poll, 20 s), so three of those: a minute by default.
 */
export const noWorkersAfterMs = (claimWorkWaitMs: number) => 3 * claimWorkWaitMs;

export async function queueAvailability(db: Queryable, taskQueueId: string, now: Date, claimWorkWaitMs: number): Promise<QueueAvailability> {
  const since = new Date(now.getTime() - noWorkersAfterMs(claimWorkWaitMs));
  const { rows } = await db.query<{
    last_claim: Date | null;
    running: number;
    recent: number;
    quarantined: number;
    starts: string[] | null;
  }>(
    `SELECT (SELECT max(last_date_active) FROM workers WHERE task_queue_id = $1) AS last_claim,
            (SELECT count(DISTINCT t.task_id)::int
               FROM workers w, jsonb_array_elements(w.recent_tasks) r JOIN tasks t ON t.task_id = r ->> 'taskId'
              WHERE w.task_queue_id = $1 AND w.expires > $2 AND t.state = 'running' AND t.taken_until > $2
                AND jsonb_array_length(t.runs) - 1 = (r ->> 'runId')::int) AS running,
            (SELECT count(*)::int FROM workers WHERE task_queue_id = $1 AND last_date_active >= $3) AS recent,
            (SELECT count(*)::int FROM workers WHERE task_queue_id = $1 AND last_date_active >= $3 AND quarantine_until > $2) AS quarantined,
            (SELECT array_agg(t.runs -> (r ->> 'runId')::int ->> 'started' ORDER BY 1)
               FROM workers w, jsonb_array_elements(w.recent_tasks) r JOIN tasks t ON t.task_id = r ->> 'taskId'
              WHERE w.task_queue_id = $1 AND w.last_date_active >= $3) AS starts`,
    [taskQueueId, now, since],
  );
  const r = rows[0];
  const starts = (r.starts ?? []).filter((s): s is string => typeof s === 'string').map((s) => Date.parse(s)).sort((a, b) => a - b);
  // The claims the recent runs show, over the time they span (each worker keeps its latest 20)
  const claimsPerMinute = starts.length >= 2 && starts[starts.length - 1] > starts[0] ? ((starts.length - 1) * 60_000) / (starts[starts.length - 1] - starts[0]) : null;
  const polledRecently = r.last_claim !== null && r.last_claim >= since;
  let verdict: QueueAvailability['verdict'];
  if (r.recent > 0 && r.quarantined === r.recent && r.running === 0) verdict = 'quarantined';
  else if (r.running > 0) verdict = 'workers-busy';
  else if (polledRecently) verdict = 'workers-polling';
  else verdict = 'no-workers';
  return {
    taskQueueId,
    lastClaimWork: r.last_claim,
    running: r.running,
    recentWorkers: r.recent,
    quarantinedWorkers: r.quarantined,
    claimsPerMinute,
    verdict,
  };
}
