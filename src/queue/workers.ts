import type pg from 'pg';
import type { Queryable } from '../db/pool.js';
import { isPendingSql } from './taskRow.js';

/**
 * Worker metadata (migration 016): provisioners, task queues (old clients' worker types) and workers, as
 * Taskcluster's queue keeps them. claimWork records what it sees through `WorkerRecorder`; the declare
 * endpoints write them directly.
 */

/** How long a task queue or provisioner stays listed after it was last active (Taskcluster: 5 days). */
export const QUEUE_TTL = '5 days';
/** How long a worker stays listed after it last claimed (Taskcluster: 1 day), unless quarantined longer. */
export const WORKER_TTL = '1 day';
/** Taskcluster keeps a worker's latest 20 claimed runs. */
export const RECENT_TASKS = 20;

export interface RecentTask {
  taskId: string;
  runId: number;
}

export const splitTaskQueueId = (taskQueueId: string): [string, string] => {
  const at = taskQueueId.indexOf('/');
  return [taskQueueId.slice(0, at), taskQueueId.slice(at + 1)];
};

interface Sighting {
  taskQueueId: string;
  workerGroup?: string;
  workerId?: string;
  at: string;
  tasks: RecentTask[];
}

// The batch as one JSON parameter: one statement whatever its size. Task queues and provisioners first, then
// workers; each INSERT takes its rows in key order, so two processes flushing at once lock rows in the same
// order. `greatest` keeps a slower flush from moving lastDateActive back.
const FLUSH_SQL = `WITH seen AS (
    SELECT * FROM jsonb_to_recordset($1::jsonb) AS s("taskQueueId" text, "workerGroup" text, "workerId" text, at timestamptz, tasks jsonb)
  ), queues AS (
    INSERT INTO task_queues (task_queue_id, provisioner_id, worker_type, expires, last_date_active)
    SELECT "taskQueueId", split_part("taskQueueId", '/', 1), substr("taskQueueId", strpos("taskQueueId", '/') + 1),
           max(at) + interval '${QUEUE_TTL}', max(at)
    FROM seen GROUP BY "taskQueueId" ORDER BY "taskQueueId"
    ON CONFLICT (task_queue_id) DO UPDATE SET
      expires = greatest(task_queues.expires, excluded.expires),
      last_date_active = greatest(task_queues.last_date_active, excluded.last_date_active)
  ), provisioners AS (
    INSERT INTO provisioners (provisioner_id, expires, last_date_active)
    SELECT split_part("taskQueueId", '/', 1), max(at) + interval '${QUEUE_TTL}', max(at)
    FROM seen GROUP BY 1 ORDER BY 1
    ON CONFLICT (provisioner_id) DO UPDATE SET
      expires = greatest(provisioners.expires, excluded.expires),
      last_date_active = greatest(provisioners.last_date_active, excluded.last_date_active)
  )
  INSERT INTO workers (task_queue_id, worker_group, worker_id, first_claim, last_date_active, expires, recent_tasks)
  SELECT "taskQueueId", "workerGroup", "workerId", at, at, at + interval '${WORKER_TTL}', tasks
  FROM seen WHERE "workerId" IS NOT NULL ORDER BY "taskQueueId", "workerGroup", "workerId"
  ON CONFLICT (task_queue_id, worker_group, worker_id) DO UPDATE SET
    last_date_active = greatest(workers.last_date_active, excluded.last_date_active),
    expires = greatest(workers.expires, excluded.expires),
    recent_tasks = (
      SELECT coalesce(jsonb_agg(t.e ORDER BY t.i), '[]') FROM (
        SELECT e, i FROM jsonb_array_elements(workers.recent_tasks || excluded.recent_tasks) WITH ORDINALITY AS a(e, i)
        ORDER BY i DESC LIMIT ${RECENT_TASKS}) t)`;

/** How often each API process deletes expired worker metadata (idempotent, so several processes may). */
const EXPIRY_INTERVAL_MS = 30 * 60 * 1000;

/** Deletes workers (not quarantined), task queues and provisioners that expired (listing already hides them). */
export async function deleteExpired(db: Queryable): Promise<void> {
  await db.query(`DELETE FROM workers WHERE expires < now() AND (quarantine_until IS NULL OR quarantine_until < now())`);
  await db.query(`DELETE FROM task_queues WHERE expires < now()`);
  await db.query(`DELETE FROM provisioners WHERE expires < now()`);
}

/**
 * Records the workers and task queues claimWork sees, off the claim's path.
 *
 * claimWork is the queue's hot path (a claim is one statement, docs/bench-journal/2026-11-23.md), so a claim only notes
 * the sighting in memory (a Map update, no I/O); every `flushMs` (2 s) one statement writes all sightings
 * of the interval — at most one upsert per worker per 2 s per process, whatever the claim rate, and none
 * while nobody claims. Measured on the development machine (Postgres on 127.0.0.1, 2 cores shared with seven
 * other loaded sessions, where a bare `SELECT 1` round trip took 6.7 ms): the in-memory note costs 13 µs per
 * claim; a flush of 1 worker took 8–48 ms and of 500 distinct workers 40–166 ms (insert vs update of
 * recent_tasks), once per 2 s, off every request's path. Writing on each claim instead would add that statement
 * to every claim. What a crash loses is at most 2 s of lastDateActive / recent tasks, which are informational.
 * Reads in this process flush first, so a worker shows up as soon as it claimed here.
 */
export class WorkerRecorder {
  private pending = new Map<string, Sighting>();
  private timer: NodeJS.Timeout | undefined;
  private flushing: Promise<void> = Promise.resolve();
  private nextExpiry = Date.now() + EXPIRY_INTERVAL_MS;

  constructor(
    private readonly pool: pg.Pool,
    private readonly flushMs = 2000,
  ) {}

  start(): void {
    this.timer = setInterval(() => {
      this.flush().catch((err) => console.error('worker recorder flush failed:', (err as Error).message));
      if (Date.now() >= this.nextExpiry) {
        this.nextExpiry = Date.now() + EXPIRY_INTERVAL_MS;
        deleteExpired(this.pool).catch((err) => console.error('deleting expired workers failed:', (err as Error).message));
      }
    }, this.flushMs);
    this.timer.unref();
  }

  /** A task queue was used (createTask); no worker. */
  queueSeen(taskQueueId: string): void {
    if (!this.pending.has(taskQueueId)) this.pending.set(taskQueueId, { taskQueueId, at: new Date().toISOString(), tasks: [] });
  }

  /** A worker asked for work (and got `tasks`). */
  workerSeen(taskQueueId: string, workerGroup: string, workerId: string, tasks: RecentTask[] = []): void {
    const key = `${taskQueueId}\n${workerGroup}\n${workerId}`;
    const at = new Date().toISOString();
    const entry = this.pending.get(key);
    if (entry) {
      entry.at = at;
      entry.tasks = [...entry.tasks, ...tasks].slice(-RECENT_TASKS);
    } else {
      this.pending.set(key, { taskQueueId, workerGroup, workerId, at, tasks: tasks.slice(-RECENT_TASKS) });
    }
  }

  /** Writes what was seen since the last flush (one statement); flushes run one at a time. */
  flush(): Promise<void> {
    this.flushing = this.flushing.catch(() => undefined).then(async () => {
      if (this.pending.size === 0) return;
      const batch = [...this.pending.values()];
      this.pending = new Map();
      try {
        await this.pool.query(FLUSH_SQL, [JSON.stringify(batch)]);
      } catch (err) {
        // keep them for the next flush, unless newer sightings replaced them
        for (const s of batch) {
          const key = s.workerId === undefined ? s.taskQueueId : `${s.taskQueueId}\n${s.workerGroup}\n${s.workerId}`;
          if (!this.pending.has(key)) this.pending.set(key, s);
        }
        throw err;
      }
    });
    return this.flushing;
  }

  async stop(): Promise<void> {
    clearInterval(this.timer);
    await this.flush().catch(() => undefined);
  }
}

// ---- task queues / worker types

export interface TaskQueueRow {
  task_queue_id: string;
  provisioner_id: string;
  worker_type: string;
  description: string;
  stability: string;
  expires: Date;
  last_date_active: Date;
}

const QUEUE_COLUMNS = 'task_queue_id, provisioner_id, worker_type, description, stability, expires, last_date_active';

export async function getTaskQueue(db: Queryable, taskQueueId: string): Promise<TaskQueueRow | undefined> {
  const { rows } = await db.query<TaskQueueRow>(`SELECT ${QUEUE_COLUMNS} FROM task_queues WHERE task_queue_id = $1 AND expires > now()`, [taskQueueId]);
  return rows[0];
}

/** Unexpired task queues after `after` in id order; with a provisionerId, only its worker types. */
export async function listTaskQueues(db: Queryable, options: { provisionerId?: string; after: string; limit: number }): Promise<TaskQueueRow[]> {
  const { rows } = await db.query<TaskQueueRow>(
    `SELECT ${QUEUE_COLUMNS} FROM task_queues
     WHERE task_queue_id > $1 AND expires > now() AND ($2::text IS NULL OR provisioner_id = $2)
     ORDER BY task_queue_id LIMIT $3`,
    [options.after, options.provisionerId ?? null, options.limit],
  );
  return rows;
}

/** declareWorkerType: creates the task queue or sets the given properties. */
export async function declareTaskQueue(
  db: Queryable,
  taskQueueId: string,
  props: { description?: string; stability?: string; expires?: string },
): Promise<TaskQueueRow> {
  const [provisionerId, workerType] = splitTaskQueueId(taskQueueId);
  const { rows } = await db.query<TaskQueueRow>(
    `INSERT INTO task_queues (task_queue_id, provisioner_id, worker_type, description, stability, expires, last_date_active)
     VALUES ($1, $2, $3, coalesce($4, ''), coalesce($5, 'experimental'), coalesce($6::timestamptz, now() + interval '${QUEUE_TTL}'), now())
     ON CONFLICT (task_queue_id) DO UPDATE SET
       description = coalesce($4, task_queues.description),
       stability = coalesce($5, task_queues.stability),
       expires = coalesce($6::timestamptz, greatest(task_queues.expires, now() + interval '${QUEUE_TTL}'))
     RETURNING ${QUEUE_COLUMNS}`,
    [taskQueueId, provisionerId, workerType, props.description ?? null, props.stability ?? null, props.expires ?? null],
  );
  return rows[0];
}

export async function pendingCount(db: Queryable, taskQueueId: string): Promise<number> {
  const [provisionerId, workerType] = splitTaskQueueId(taskQueueId);
  const { rows } = await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM tasks WHERE provisioner_id = $1 AND worker_type = $2 AND ${isPendingSql()}`,
    [provisionerId, workerType],
  );
  return rows[0].n;
}

// ---- provisioners

export interface ProvisionerRow {
  provisioner_id: string;
  description: string;
  stability: string;
  actions: unknown[];
  expires: Date;
  last_date_active: Date;
}

const PROVISIONER_COLUMNS = 'provisioner_id, description, stability, actions, expires, last_date_active';

export async function getProvisioner(db: Queryable, provisionerId: string): Promise<ProvisionerRow | undefined> {
  const { rows } = await db.query<ProvisionerRow>(
    `SELECT ${PROVISIONER_COLUMNS} FROM provisioners WHERE provisioner_id = $1 AND expires > now()`,
    [provisionerId],
  );
  return rows[0];
}

export async function listProvisioners(db: Queryable, options: { after: string; limit: number }): Promise<ProvisionerRow[]> {
  const { rows } = await db.query<ProvisionerRow>(
    `SELECT ${PROVISIONER_COLUMNS} FROM provisioners WHERE provisioner_id > $1 AND expires > now() ORDER BY provisioner_id LIMIT $2`,
    [options.after, options.limit],
  );
  return rows;
}

export async function declareProvisioner(
  db: Queryable,
  provisionerId: string,
  props: { description?: string; stability?: string; expires?: string; actions?: unknown[] },
): Promise<ProvisionerRow> {
  const { rows } = await db.query<ProvisionerRow>(
    `INSERT INTO provisioners (provisioner_id, description, stability, actions, expires, last_date_active)
     VALUES ($1, coalesce($2, ''), coalesce($3, 'experimental'), coalesce($4::jsonb, '[]'), coalesce($5::timestamptz, now() + interval '${QUEUE_TTL}'), now())
     ON CONFLICT (provisioner_id) DO UPDATE SET
       description = coalesce($2, provisioners.description),
       stability = coalesce($3, provisioners.stability),
       actions = coalesce($4::jsonb, provisioners.actions),
       expires = coalesce($5::timestamptz, greatest(provisioners.expires, now() + interval '${QUEUE_TTL}'))
     RETURNING ${PROVISIONER_COLUMNS}`,
    [provisionerId, props.description ?? null, props.stability ?? null, props.actions ? JSON.stringify(props.actions) : null, props.expires ?? null],
  );
  return rows[0];
}

// ---- workers

export interface WorkerRow {
  task_queue_id: string;
  worker_group: string;
  worker_id: string;
  first_claim: Date;
  last_date_active: Date;
  expires: Date;
  quarantine_until: Date | null;
  quarantine_details: unknown[];
  recent_tasks: RecentTask[];
}

const WORKER_COLUMNS =
  'task_queue_id, worker_group, worker_id, first_claim, last_date_active, expires, quarantine_until, quarantine_details, recent_tasks';
// A worker is listed until it expires, or longer while it is quarantined (Taskcluster).
const LISTED = '(expires > now() OR quarantine_until > now())';

export async function getWorker(db: Queryable, taskQueueId: string, workerGroup: string, workerId: string): Promise<WorkerRow | undefined> {
  const { rows } = await db.query<WorkerRow>(
    `SELECT ${WORKER_COLUMNS} FROM workers WHERE task_queue_id = $1 AND worker_group = $2 AND worker_id = $3 AND ${LISTED}`,
    [taskQueueId, workerGroup, workerId],
  );
  return rows[0];
}

/** Workers of a task queue in (workerGroup, workerId) order after `after`; `quarantined` filters. */
export async function listWorkers(
  db: Queryable,
  options: { taskQueueId: string; after: [string, string]; limit: number; quarantined?: boolean },
): Promise<WorkerRow[]> {
  const { rows } = await db.query<WorkerRow>(
    `SELECT ${WORKER_COLUMNS} FROM workers
     WHERE task_queue_id = $1 AND (worker_group, worker_id) > ($2, $3) AND ${LISTED}
       AND ($4::boolean IS NULL OR (coalesce(quarantine_until > now(), false)) = $4)
     ORDER BY worker_group, worker_id LIMIT $5`,
    [options.taskQueueId, options.after[0], options.after[1], options.quarantined ?? null, options.limit],
  );
  return rows;
}

/** declareWorker: creates the worker (and its task queue) or moves its expiry. */
export async function declareWorker(db: pg.PoolClient, taskQueueId: string, workerGroup: string, workerId: string, expires: string): Promise<WorkerRow> {
  await declareProvisioner(db, splitTaskQueueId(taskQueueId)[0], {});
  await declareTaskQueue(db, taskQueueId, {});
  const { rows } = await db.query<WorkerRow>(
    `INSERT INTO workers (task_queue_id, worker_group, worker_id, first_claim, last_date_active, expires)
     VALUES ($1, $2, $3, now(), now(), $4)
     ON CONFLICT (task_queue_id, worker_group, worker_id) DO UPDATE SET expires = $4, last_date_active = now()
     RETURNING ${WORKER_COLUMNS}`,
    [taskQueueId, workerGroup, workerId, expires],
  );
  return rows[0];
}

/** Sets quarantineUntil and appends the details; undefined when the worker is not known. */
export async function quarantineWorker(
  db: Queryable,
  taskQueueId: string,
  workerGroup: string,
  workerId: string,
  until: string,
  details: Record<string, unknown>,
): Promise<WorkerRow | undefined> {
  const { rows } = await db.query<WorkerRow>(
    `UPDATE workers SET quarantine_until = $4, quarantine_details = quarantine_details || jsonb_build_array($5::jsonb)
     WHERE task_queue_id = $1 AND worker_group = $2 AND worker_id = $3 AND ${LISTED}
     RETURNING ${WORKER_COLUMNS}`,
    [taskQueueId, workerGroup, workerId, until, JSON.stringify(details)],
  );
  return rows[0];
}
