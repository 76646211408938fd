import { anyOf, prepared, type Queryable } from '../db/pool.js';
import { isUnresolvedSql } from '../db/taskPredicates.js';
import { isResolved, type TaskState } from '../taskStates.js';
import { MAX_RUNS, type RunOf } from './run.js';

export type RunState = Exclude<TaskState, 'unscheduled'>;

/** One element of Taskcluster's `runs` array (index = runId). */
export type Run = RunOf<RunState>;

export interface TaskRow {
  task_id: string;
  task_group_id: string;
  scheduler_id: string;
  provisioner_id: string;
  worker_type: string;
  priority: string;
  retries: number;
  retries_left: number;
  deadline: Date;
  expires: Date;
  state: TaskState;
  runs: Run[];
  taken_until: Date | null;
  routing: string | null;
  routes: string[];
  tags: Record<string, string>;
  project_id: string;
}

export { isPendingSql, isUnresolvedSql } from '../db/taskPredicates.js';

/** Columns for TaskRow (without the definition body; `routing`, `routes` and `tags` come out of it). */
export const TASK_COLUMNS = `task_id, task_group_id, scheduler_id, provisioner_id, worker_type, priority, retries, retries_left,
  deadline, expires, state, runs, taken_until, definition->>'routing' AS routing,
  ARRAY(SELECT jsonb_array_elements_text(definition->'routes')) AS routes, definition->'tags' AS tags,
  coalesce(definition->>'projectId', 'none') AS project_id`;

/**
 * SQL: the outbox payload `{row}` of the task-defined message of the task `taskIdSql` names (a column of the
 * enclosing query), rendered from its row as it was defined: unscheduled, no runs, every retry left. A graph's tasks
 * are stored so and nothing else of the snapshot changes later (the routing a submit corrects is corrected before
 * it commits), so the relay renders it when it publishes instead of the submit storing a copy of each row
 * (src/scheduler/announceDefined.ts). NULL once the task is gone.
 */
export const taskAsDefinedSql = (taskIdSql: string) => `(SELECT jsonb_build_object('row', to_jsonb(c) ||
    jsonb_build_object('state', 'unscheduled', 'runs', '[]'::jsonb, 'retries_left', c.retries, 'taken_until', NULL))
  FROM (SELECT ${TASK_COLUMNS} FROM tasks WHERE tasks.task_id = ${taskIdSql}) c)`;

export interface TaskStatus {
  taskId: string;
  provisionerId: string;
  workerType: string;
  taskQueueId: string;
  schedulerId: string;
  projectId: string;
  taskGroupId: string;
  priority: string;
  deadline: string;
  expires: string;
  retriesLeft: number;
  state: TaskState;
  runs: Run[];
}

export function taskStatus(row: TaskRow): TaskStatus {
  return {
    taskId: row.task_id,
    provisionerId: row.provisioner_id,
    workerType: row.worker_type,
    taskQueueId: `${row.provisioner_id}/${row.worker_type}`,
    schedulerId: row.scheduler_id,
    projectId: row.project_id,
    taskGroupId: row.task_group_id,
    priority: row.priority,
    deadline: row.deadline.toISOString(),
    expires: row.expires.toISOString(),
    retriesLeft: row.retries_left,
    state: row.state,
    runs: row.runs,
  };
}

/** Loads rows (locked FOR UPDATE when asked), keyed by taskId. */
export async function loadTasks(db: Queryable, taskIds: string[], lock: 'update' | 'none' = 'none'): Promise<TaskRow[]> {
  if (taskIds.length === 0) return [];
  const { rows } = await db.query<TaskRow>(
    prepared(`SELECT ${TASK_COLUMNS} FROM tasks WHERE task_id = ${anyOf('$1', 'text')} ORDER BY task_id${lock === 'update' ? ' FOR UPDATE' : ''}`, [taskIds]),
  );
  return rows;
}

/**
 * One row, unlocked. Its own statement: with `task_id = ANY($1)` Postgres never settles on a generic plan for a
 * one-element array (it estimates 10 rows) and planned every report's read again (0.13 ms each).
 */
export async function loadTask(db: Queryable, taskId: string): Promise<TaskRow | undefined> {
  const { rows } = await db.query<TaskRow>(prepared(`SELECT ${TASK_COLUMNS} FROM tasks WHERE task_id = $1`, [taskId]));
  return rows[0];
}

/**
 * Writes back the mutable part of rows changed in JavaScript (state, runs, retries, claim time, FIFO time)
 * in one statement. Operations lock the rows first, change them with the run helpers, then call this.
 */
export async function saveTasks(db: Queryable, rows: TaskRow[]): Promise<void> {
  if (rows.length === 0) return;
  for (let i = 0; i < rows.length; i += 2000) {
    const chunk = rows.slice(i, i + 2000).map((r) => {
      const latest = r.runs[r.runs.length - 1];
      return {
        task_id: r.task_id,
        state: r.state,
        runs: r.runs,
        retries_left: r.retries_left,
        taken_until: r.state === 'running' && latest?.takenUntil ? latest.takenUntil : null,
        pending_since: r.state === 'pending' ? latest?.scheduled ?? null : null,
      };
    });
    await db.query(
      prepared(
        `UPDATE tasks t SET state = v.state, runs = v.runs, retries_left = v.retries_left,
                taken_until = v.taken_until, pending_since = v.pending_since
         FROM jsonb_to_recordset($1::jsonb) AS v(task_id text, state text, runs jsonb, retries_left int, taken_until timestamptz, pending_since timestamptz)
         WHERE t.task_id = v.task_id AND t.task_id = ANY($2::text[])`,
        // the ANY() lets the planner use the primary key instead of a hash join over every task
        [JSON.stringify(chunk), chunk.map((c) => c.task_id)],
      ),
    );
  }
}

/** Appends a pending run. */
/**
 * Whether a resolution of the latest run may retry it (a new run, reasonCreated retry / task-retry): retries are
 * left and the task is under Taskcluster's 50 runs. A rerun gives the retries back, so they alone do not bound
 * the runs: without the second check a rerun task's retries made a 51st run (runId 50), which no message may name.
 */
export function mayRetry(row: TaskRow): boolean {
  return row.retries_left > 0 && row.runs.length < MAX_RUNS;
}

export function addPendingRun(row: TaskRow, reasonCreated: Run['reasonCreated'], now: Date): Run {
  const run: Run = { runId: row.runs.length, state: 'pending', reasonCreated, scheduled: now.toISOString() };
  row.runs = [...row.runs, run];
  row.state = 'pending';
  row.taken_until = null;
  return run;
}

/** Resolves the latest run (adds an exception run to a task that has none, as Taskcluster does). */
export function resolveLatestRun(row: TaskRow, state: 'completed' | 'failed' | 'exception', reasonResolved: string, now: Date): Run {
  let run = row.runs[row.runs.length - 1];
  if (!run || isResolved(run.state)) {
    run = { runId: row.runs.length, state: 'pending', reasonCreated: 'exception', scheduled: now.toISOString() };
    row.runs = [...row.runs, run];
  }
  const resolved: Run = { ...run, state, reasonResolved, resolved: now.toISOString() };
  delete resolved.takenUntil;
  if (run.takenUntil) resolved.takenUntil = run.takenUntil;
  row.runs = [...row.runs.slice(0, -1), resolved];
  row.state = state;
  row.taken_until = null;
  return resolved;
}

/** A task's row and its stored definition: what the list endpoints show of each task. */
export type TaskWithDefinition = TaskRow & { definition: Record<string, unknown> };

/** The task definition as stored (defaults filled in). */
export async function loadDefinition(db: Queryable, taskId: string): Promise<Record<string, unknown> | undefined> {
  const { rows } = await db.query<{ definition: Record<string, unknown> }>('SELECT definition FROM tasks WHERE task_id = $1', [taskId]);
  return rows[0]?.definition;
}

/** The scopes a task's definition grants its runs (none for a task that does not exist). */
export async function loadTaskScopes(db: Queryable, taskId: string): Promise<string[]> {
  const { rows } = await db.query<{ scopes: string[] }>(
    `SELECT ARRAY(SELECT jsonb_array_elements_text(definition->'scopes')) AS scopes FROM tasks WHERE task_id = $1`,
    [taskId],
  );
  return rows[0]?.scopes ?? [];
}

/**
 * Which of `taskIds` exist. Named, the array through anyOf: createTask asks at every call (for its own ids and its
 * dependencies), and unnamed Postgres planned it each time.
 */
/**
 * The worker each of these runs was claimed by (`workerGroup/workerId`), where the run exists and was claimed.
 * Keyed `taskId/runId`.
 */
export async function runClaimants(db: Queryable, runs: { taskId: string; runId: number }[]): Promise<Map<string, string>> {
  const { rows } = await db.query<{ run: string; worker: string }>(
    `SELECT r.task_id || '/' || r.run_id AS run, (t.runs -> r.run_id ->> 'workerGroup') || '/' || (t.runs -> r.run_id ->> 'workerId') AS worker
     FROM unnest($1::text[], $2::int[]) AS r(task_id, run_id) JOIN tasks t ON t.task_id = r.task_id
     WHERE t.runs -> r.run_id ->> 'workerId' IS NOT NULL`,
    [runs.map((r) => r.taskId), runs.map((r) => r.runId)],
  );
  return new Map(rows.map((r) => [r.run, r.worker]));
}

export async function existingTaskIds(db: Queryable, taskIds: string[]): Promise<Set<string>> {
  const { rows } = await db.query<{ task_id: string }>(prepared(`SELECT task_id FROM tasks WHERE task_id = ${anyOf('$1', 'text')}`, [taskIds]));
  return new Set(rows.map((r) => r.task_id));
}

export async function taskExists(db: Queryable, taskId: string): Promise<boolean> {
  const { rowCount } = await db.query('SELECT 1 FROM tasks WHERE task_id = $1', [taskId]);
  return rowCount !== 0;
}

/** Up to `limit` tasks of a group with taskId after `after`, in taskId order. */
export async function listGroupTasks(db: Queryable, taskGroupId: string, after: string, limit: number): Promise<TaskWithDefinition[]> {
  const { rows } = await db.query<TaskWithDefinition>(
    `SELECT ${TASK_COLUMNS}, definition FROM tasks WHERE task_group_id = $1 AND task_id > $2 ORDER BY task_id LIMIT $3`,
    [taskGroupId, after, limit],
  );
  return rows;
}

/** Up to `limit` tasks that depend on `taskId`, with taskId after `after`, in taskId order. */
export async function listDependentTasks(db: Queryable, taskId: string, after: string, limit: number): Promise<TaskWithDefinition[]> {
  const { rows } = await db.query<TaskWithDefinition>(
    `SELECT ${TASK_COLUMNS}, definition FROM tasks WHERE task_id IN (
       SELECT dependent_task_id FROM task_dependencies WHERE required_task_id = $1 AND dependent_task_id > $2
       ORDER BY dependent_task_id LIMIT $3)
     ORDER BY task_id`,
    [taskId, after, limit],
  );
  return rows;
}

/** The taskIds of a group's unscheduled, pending and running tasks. */
export async function unresolvedTaskIds(db: Queryable, taskGroupId: string): Promise<string[]> {
  const { rows } = await db.query<{ task_id: string }>(
    `SELECT task_id FROM tasks WHERE task_group_id = $1 AND ${isUnresolvedSql()}`,
    [taskGroupId],
  );
  return rows.map((r) => r.task_id);
}

export async function countGroupTasks(db: Queryable, taskGroupId: string): Promise<number> {
  const { rows } = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM tasks WHERE task_group_id = $1', [taskGroupId]);
  return rows[0].n;
}
