import type pg from 'pg';
import { prepared } from '../db/pool.js';
import { OUTBOX_CHANNEL } from '../exchanges/outbox.js';
import { latestRunsSql, runResolution, type LatestRun } from '../queue/latestRuns.js';
import { PENDING_CHANNEL } from '../queue/notify.js';
import { readySql } from '../queue/readiness.js';
import { scheduleCtes } from '../queue/scheduleTasks.js';
import { DISPATCH_MEMBERS_SQL, needsGeneralDispatchSql } from '../scheduler/graphStore.js';
import type { Resolution } from '../workflows/contract.js';

/**
 * The common dispatch, ready tasks to schedule and nothing else, in one statement and no explicit transaction (as
 * the claim and the report are): the members of the graph ($1) among the taskIds ($2, DISPATCH_MEMBERS_SQL), those of
 * them whose dependencies the stored state shows resolved (readySql, in the statement's one snapshot), scheduled as
 * scheduleTasks schedules (scheduleCtes: the same rows, runs and task-pending rows; $3 and $4 the time), and the
 * latest runs of the taskIds already resolved (latestRunsSql), which the activity reports back.
 *
 * When a ready member needs the general path (needsGeneralDispatchSql: a cached node is looked up in the cache
 * first) the statement changes nothing and says so in `general`; the activity then dispatches the batch the general
 * way. That costs such a batch one read more, and the common one four round trips fewer: BEGIN, the members and
 * readiness reads, COMMIT, and the read of resolved runs after it.
 */
const DISPATCH_IN_ONE_SQL = `WITH members AS (
    ${DISPATCH_MEMBERS_SQL}
  ), ready AS (
    ${readySql('t.task_id IN (SELECT task_id FROM members)')}
  ), general AS (
    SELECT EXISTS (SELECT 1 FROM members m JOIN ready r ON r.task_id = m.task_id WHERE ${needsGeneralDispatchSql('m')}) AS needed
  ), ${scheduleCtes('task_id IN (SELECT task_id FROM ready) AND NOT (SELECT needed FROM general)', '$3', '$4')}
  SELECT (SELECT needed FROM general) AS general,
    (SELECT coalesce(jsonb_agg(jsonb_build_object(
        'task_id', r.task_id, 'resolved', r.resolved, 'run_count', jsonb_array_length(s.runs), 'scheduled', s.runs -> -1 ->> 'scheduled',
        'task_queue_id', s.provisioner_id || '/' || s.worker_type)), '[]'::jsonb)
     FROM ready r LEFT JOIN scheduled s ON s.task_id = r.task_id) AS ready,
    (SELECT coalesce(jsonb_agg(to_jsonb(l) ORDER BY l.task_id), '[]'::jsonb) FROM (${latestRunsSql('$2', { resolved: true })}) l) AS resolved`;

/**
 * The wake-ups of a schedule, as the general path sends them after its COMMIT: the relay ($1[1] the outbox's channel,
 * no payload) and the claimers of each queue that has tasks pending now, in one round trip once the statement has
 * committed. Awaited before the activity returns, as the general path's are: sent without waiting (notifySoon, as the
 * claim and the report do), the activity's completion and the workflow's next task ran on the two cores while the
 * claimers woke, and the hop's pending → claimed grew from 7.8 ms (the general path) to 12.8, where awaited it was 8.9
 * (medians of the p50s of 6 rotated runs each of the hop scenario, load average 3-11 on 2 shared cores;
 * docs/bench-journal/2026-11-29.md).
 */
const WAKE_SQL = 'SELECT pg_notify(n.channel, n.payload) FROM unnest($1::text[], $2::text[]) AS n(channel, payload)';

/** A ready member of the batch: the start of its hop (readySql's `resolved`), and its new run if this call scheduled it. */
interface ReadyRow {
  task_id: string;
  resolved: number | null;
  /** the task's runs after the schedule; null: not scheduled by this call (no longer unscheduled, or past its deadline) */
  run_count: number | null;
  scheduled: string | null;
  task_queue_id: string | null;
}

/** What dispatchInOne did: as the general path reports it. */
export interface DispatchedInOne {
  /** ready tasks: the latest resolution among their dependencies (ms since the epoch; null without dependencies) */
  ready: Map<string, number | null>;
  /** tasks this call made pending with their first run, and when */
  firstRuns: { taskId: string; scheduled: string }[];
  /** the latest runs of the asked tasks that are resolved */
  resolutions: Resolution[];
}

/**
 * Schedules the ready members among `taskIds` in DISPATCH_IN_ONE_SQL, then wakes the relay and the claimers of the
 * queues it made tasks pending in (WAKE_SQL). Undefined: a ready member needs the general path, and nothing was written.
 */
export async function dispatchInOne(pool: pg.Pool, taskGraphId: string, taskIds: string[]): Promise<DispatchedInOne | undefined> {
  const now = new Date().toISOString();
  const { rows } = await pool.query<{ general: boolean; ready: ReadyRow[]; resolved: Pick<LatestRun, 'task_id' | 'run_id' | 'state' | 'reason'>[] }>(
    prepared(DISPATCH_IN_ONE_SQL, [taskGraphId, [...new Set(taskIds)], now, now]),
  );
  const [{ general, ready, resolved }] = rows;
  if (general) return undefined;
  const scheduled = ready.filter((r) => r.task_queue_id !== null);
  if (scheduled.length > 0) {
    const queues = [...new Set(scheduled.map((r) => r.task_queue_id as string))];
    await pool.query(prepared(WAKE_SQL, [[OUTBOX_CHANNEL, ...queues.map(() => PENDING_CHANNEL)], ['', ...queues]]));
  }
  return {
    ready: new Map(ready.map((r) => [r.task_id, r.resolved])),
    firstRuns: scheduled.flatMap((r) => (r.run_count === 1 && r.scheduled !== null ? [{ taskId: r.task_id, scheduled: r.scheduled }] : [])),
    resolutions: resolved.flatMap((row) => runResolution(row) ?? []),
  };
}
