import type { Queryable } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { isPendingSql } from '../db/taskPredicates.js';
import { TASK_COLUMNS, type TaskWithDefinition } from './taskRow.js';
import { splitTaskQueueId } from './workers.js';

/*
 * The pending and claimed tasks of one task queue, for taskQueueCounts, listPendingTasks and listClaimedTasks.
 * Paged by keys read straight from the indexes claims use, so a page costs its own rows whatever the queue holds.
 */

/** A timestamp as a key: microseconds, UTC, which Postgres reads back exactly (a JS Date keeps milliseconds). */
const keyTime = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')`;
const KEY_TIME = /^[1-9]\d{3}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}\.\d{6}Z$/;
/** A key's time as keyTime writes it, and a real one (no 30 February, which Postgres would refuse with a 500). */
function isKeyTime(time: string): boolean {
  const ms = Date.parse(time);
  return KEY_TIME.test(time) && !Number.isNaN(ms) && new Date(ms).toISOString().slice(0, 19) === time.slice(0, 19);
}

const badToken = () => new TgsError('InputError', 'Invalid continuationToken: pass the one from the previous page unchanged');

/** `<time> <taskId>` (with a priority rank in front for pending tasks), as the pages below make them. */
function parseKey(key: string, parts: 2 | 3): string[] {
  const fields = key.split(' ');
  if (fields.length !== parts || !isKeyTime(fields[parts - 2]) || fields[parts - 1] === '') throw badToken();
  if (parts === 3 && !/^[1-7]$/.test(fields[0])) throw badToken();
  return fields;
}

/** Running tasks whose claim has not expired (Taskcluster's count leaves out claims past takenUntil). */
export async function claimedCount(db: Queryable, taskQueueId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM tasks
     WHERE state = 'running' AND taken_until > now() AND provisioner_id = $1 AND worker_type = $2`,
    splitTaskQueueId(taskQueueId),
  );
  return rows[0].n;
}

export type PendingTask = TaskWithDefinition & { pending_since: Date; key: string };

/**
 * Up to `limit` pending tasks in the order claimWork takes them (highest priority first, then the time each became
 * pending, then taskId: the tasks_pending index), after the key `after` (`''` for the first page). Two index
 * ranges: the rest of the key's priority, then the lower priorities.
 */
export async function pendingTasksPage(db: Queryable, taskQueueId: string, after: string, limit: number): Promise<PendingTask[]> {
  const [rank, since, taskId] = after === '' ? ['8', '1970-01-01T00:00:00.000000Z', ''] : parseKey(after, 3);
  const select = `SELECT ${TASK_COLUMNS}, definition, pending_since, priority_rank, priority_rank || ' ' || ${keyTime('pending_since')} || ' ' || task_id AS key
    FROM tasks WHERE provisioner_id = $1 AND worker_type = $2 AND ${isPendingSql()}`;
  const { rows } = await db.query<PendingTask>(
    `SELECT * FROM (
       (${select} AND priority_rank = $3 AND (pending_since, task_id) > ($4::timestamptz, $5) ORDER BY pending_since, task_id LIMIT $6)
       UNION ALL
       (${select} AND priority_rank < $3 ORDER BY priority_rank DESC, pending_since, task_id LIMIT $6)
     ) page ORDER BY priority_rank DESC, pending_since, task_id LIMIT $6`,
    [...splitTaskQueueId(taskQueueId), Number(rank), since, taskId, limit],
  );
  return rows;
}

export type ClaimedTask = TaskWithDefinition & { key: string };

/**
 * Up to `limit` claimed tasks (running, claim not expired) by the time their claim runs out, which is the order
 * of their latest claim or reclaim (Taskcluster's `claimed` order), then taskId; after the key `after`.
 */
export async function claimedTasksPage(db: Queryable, taskQueueId: string, after: string, limit: number): Promise<ClaimedTask[]> {
  const [until, taskId] = after === '' ? ['1970-01-01T00:00:00.000000Z', ''] : parseKey(after, 2);
  const { rows } = await db.query<ClaimedTask>(
    `SELECT ${TASK_COLUMNS}, definition, ${keyTime('taken_until')} || ' ' || task_id AS key
     FROM tasks
     WHERE state = 'running' AND provisioner_id = $1 AND worker_type = $2 AND taken_until > now()
       AND taken_until >= $3::timestamptz AND (taken_until, task_id) > ($3::timestamptz, $4)
     ORDER BY taken_until, task_id LIMIT $5`,
    [...splitTaskQueueId(taskQueueId), until, taskId, limit],
  );
  return rows;
}
