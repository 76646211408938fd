import type pg from 'pg';
import type { Config } from '../config.js';
import { prepared, type StatementPart } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { enqueueMessages } from '../exchanges/outbox.js';
import { PRIORITIES } from './createTaskScopes.js';
import type { TaskDefinition } from './definition.js';
import { dependentTaskDefinedMessage, taskMessage } from './messages.js';
import { notifyPending } from './notify.js';
import { existingTaskIds, loadTasks, taskStatus, type Run, type TaskRow, type TaskStatus } from './taskRow.js';

/** highest = 7 … lowest = 1; `normal` is lowest (docs/formats.md § Task definition). */
export function priorityRank(priority: string): number {
  const i = PRIORITIES.indexOf((priority === 'normal' ? 'lowest' : priority) as (typeof PRIORITIES)[number]);
  return PRIORITIES.length - i;
}

// Rows per INSERT: 2,000 task definitions of ~1 KB stay well under Postgres' parameter and memory limits,
// and make 100,000 tasks ~50 statements instead of 100,000.
const CHUNK = 2000;

const initialRuns = (pending: boolean, now: Date): Run[] =>
  pending ? [{ runId: 0, state: 'pending', reasonCreated: 'scheduled', scheduled: now.toISOString() }] : [];

/** The TaskRow a new task is stored as (TASK_COLUMNS' shape), for its messages and status. */
function freshRow(taskId: string, d: TaskDefinition, scheduleIndependent: boolean, now: Date): TaskRow {
  const pending = scheduleIndependent && d.dependencies.length === 0;
  return {
    task_id: taskId,
    task_group_id: d.taskGroupId,
    scheduler_id: d.schedulerId,
    provisioner_id: d.provisionerId,
    worker_type: d.workerType,
    priority: d.priority,
    retries: d.retries,
    retries_left: d.retries,
    deadline: new Date(d.deadline),
    expires: new Date(d.expires),
    state: pending ? 'pending' : 'unscheduled',
    runs: initialRuns(pending, now),
    taken_until: null,
    routing: (d as { routing?: string }).routing ?? null,
    routes: d.routes ?? [],
    tags: (d.tags as Record<string, string> | undefined) ?? {},
    project_id: (d as { projectId?: string }).projectId ?? 'none',
  };
}

/**
 * createTask's groups expire up to this after their latest task, bumped an hour at a time as Taskcluster's queue does:
 * the tasks of one group (a decision task's, created 50 at a time) then leave its row as it is, where each of them
 * wrote a new version of it, one after another (the bench's createTask, 50 at once into one group, alternated: 488 and
 * 553 tasks/s at 1.37-1.58 ms of Postgres CPU a task before, 707 and 729 at 0.96-0.99 with the slack and the tasks
 * written last, below). A graph's group is written by its own submit alone: no slack.
 */
const GROUP_EXPIRES_SLACK = '1 hour';

/**
 * One statement for a chunk of new tasks: their rows, their dependency edges (two text[] parameters parse far faster
 * than a jsonb array of pairs: 400,000 edges took 3.6 s that way; no ON CONFLICT: every dependent is new and its edges
 * are distinct, and the conflict check made 400,000 edges take 2.5 s instead of 2.0 s), `alongside` (another table's
 * rows written with them, its parameters after these five), and their groups' upsert ($5: the groups' expires slack).
 * The upsert writes a group only when it is new, its expires must grow or it was announced resolved; it answers those
 * rows and every row the checks after it refuse (sealed, another schedulerId). A row it leaves as it is is locked all
 * the same until the commit (ON CONFLICT DO UPDATE locks the row it conflicts with whether or not its WHERE holds), so
 * no seal comes in between.
 * Data-modifying CTEs run on one snapshot, so none of them reads what another writes; none needs to.
 */
const insertChunkSql = (alongside?: string) => `WITH inserted AS (
    INSERT INTO tasks (task_id, task_group_id, scheduler_id, provisioner_id, worker_type, priority, priority_rank,
                       requires, retries, retries_left, created, deadline, expires, definition, state, runs, pending_since)
    SELECT v.task_id, v.task_group_id, v.scheduler_id, v.provisioner_id, v.worker_type, v.priority, v.priority_rank,
           v.requires, v.retries, v.retries, v.created, v.deadline, v.expires, v.definition, v.state, v.runs, v.pending_since
    FROM jsonb_to_recordset($2::jsonb) AS v(task_id text, task_group_id text, scheduler_id text, provisioner_id text,
         worker_type text, priority text, priority_rank smallint, requires text, retries int, created timestamptz,
         deadline timestamptz, expires timestamptz, definition jsonb, state text, runs jsonb, pending_since timestamptz)
  ), edges AS (
    INSERT INTO task_dependencies (required_task_id, dependent_task_id)
    SELECT * FROM unnest($3::text[], $4::text[])
  )${alongside === undefined ? '' : `, alongside AS (
    ${alongside}
  )`}
  INSERT INTO task_groups (task_group_id, scheduler_id, expires)
  SELECT g.id, g.scheduler_id, g.expires + $5::interval FROM jsonb_to_recordset($1::jsonb) AS g(id text, scheduler_id text, expires timestamptz)
  ON CONFLICT (task_group_id) DO UPDATE SET expires = greatest(task_groups.expires, excluded.expires), resolved_at = NULL
    WHERE task_groups.expires < excluded.expires - $5::interval OR task_groups.resolved_at IS NOT NULL
       OR task_groups.sealed IS NOT NULL OR task_groups.scheduler_id <> excluded.scheduler_id
  RETURNING task_group_id, scheduler_id, sealed`;

/**
 * Inserts tasks nobody stored yet (a caller's fresh slugids, or ids createTasks found absent) in the caller's
 * transaction, which must roll back when this throws: their groups (one schedulerId per group, sealed groups take no
 * new tasks, expires grows to the latest task), the rows and their dependency edges, each chunk in one statement and
 * checked against its groups' rows after. A task without dependencies is pending at once when `scheduleIndependent`
 * (the queue's createTask); the graph scheduler schedules its own roots. `dependenciesKnown` skips the check that each
 * dependency exists, for a caller that checked them itself (a graph's chunks name tasks of later chunks). `alongside`
 * (given the number of its first parameter) is another table's INSERT made part of the first chunk's statement: the
 * graph intake's nodes. Writes no message and answers nothing: the graph intake needs neither for its 100,000 tasks.
 *
 * One statement rather than one for each table: the graph intake prepares its next chunk meanwhile, and each of four
 * statements waited for its event loop to send the next. Over a 100,000-task submit, Postgres' backend was idle in the
 * transaction in 38 % of the samples of its state with four, 18 % with one, and the submit took 19.4-23.6 s against
 * 13.9-19.8 (bench/submitMemory.ts alternated, a 2-vCPU Xeon, 2026-11-26; docs/bench-journal/2026-11-26.md).
 */
export async function insertNewTasks(
  client: pg.PoolClient,
  tasks: { taskId: string; definition: TaskDefinition }[],
  options: {
    scheduleIndependent: boolean;
    dependenciesKnown: boolean;
    now: Date;
    alongside?: (first: number) => StatementPart;
    /** how far past its latest task a group's expires may be set (GROUP_EXPIRES_SLACK); none by default */
    groupExpiresSlack?: string;
  },
): Promise<void> {
  if (tasks.length === 0) return;
  const { now } = options;
  // Groups: one schedulerId per group, sealed groups take no new tasks, expires grows to the latest task.
  const groups = new Map<string, { schedulerId: string; expires: string }>();
  for (const t of tasks) {
    const g = groups.get(t.definition.taskGroupId);
    if (g && g.schedulerId !== t.definition.schedulerId) {
      throw new TgsError('RequestConflict', `tasks of group ${t.definition.taskGroupId} must share one schedulerId`);
    }
    if (!g || g.expires < t.definition.expires) groups.set(t.definition.taskGroupId, { schedulerId: t.definition.schedulerId, expires: t.definition.expires });
  }
  const groupsJson = JSON.stringify([...groups].map(([id, g]) => ({ id, scheduler_id: g.schedulerId, expires: g.expires })));
  // Dependencies must exist already or be created in this same call.
  const creating = new Set(tasks.map((t) => t.taskId));
  const deps = options.dependenciesKnown ? [] : [...new Set(tasks.flatMap((t) => t.definition.dependencies))].filter((d) => !creating.has(d));
  if (deps.length > 0) {
    const found = await existingTaskIds(client, deps);
    const missing = deps.filter((d) => !found.has(d));
    if (missing.length > 0) throw new TgsError('InputError', `dependencies do not exist: ${missing.slice(0, 20).join(', ')}`);
  }
  for (let i = 0; i < tasks.length; i += CHUNK) {
    const slice = tasks.slice(i, i + CHUNK);
    const rows = slice.map((t) => {
      const pending = options.scheduleIndependent && t.definition.dependencies.length === 0;
      return {
        task_id: t.taskId,
        task_group_id: t.definition.taskGroupId,
        scheduler_id: t.definition.schedulerId,
        provisioner_id: t.definition.provisionerId,
        worker_type: t.definition.workerType,
        priority: t.definition.priority,
        priority_rank: priorityRank(t.definition.priority),
        requires: t.definition.requires,
        retries: t.definition.retries,
        created: t.definition.created,
        deadline: t.definition.deadline,
        expires: t.definition.expires,
        definition: t.definition,
        state: pending ? 'pending' : 'unscheduled',
        runs: initialRuns(pending, now),
        pending_since: pending ? now.toISOString() : null,
      };
    });
    const required: string[] = [];
    const dependent: string[] = [];
    for (const t of slice) {
      for (const d of new Set(t.definition.dependencies)) {
        required.push(d);
        dependent.push(t.taskId);
      }
    }
    const params: unknown[] = [groupsJson, JSON.stringify(rows), required, dependent, options.groupExpiresSlack ?? '0 seconds'];
    const alongside = i === 0 ? options.alongside?.(params.length + 1) : undefined;
    const { rows: groupRows } = await client.query<{ task_group_id: string; scheduler_id: string; sealed: Date | null }>(
      prepared(insertChunkSql(alongside?.sql), [...params, ...(alongside?.params ?? [])]),
    );
    for (const g of groupRows) {
      if (g.scheduler_id !== groups.get(g.task_group_id)?.schedulerId) {
        throw new TgsError('RequestConflict', `task group ${g.task_group_id} belongs to schedulerId ${g.scheduler_id}; all its tasks must use it`);
      }
      if (g.sealed) throw new TgsError('RequestConflict', `task group ${g.task_group_id} is sealed: it accepts no new tasks`);
    }
  }
}

/**
 * Creates tasks in the caller's transaction (the queue's createTask). Idempotent per task: the same definition
 * again returns the stored status, a different one is a 409. A task without dependencies becomes pending at once
 * (Taskcluster); one with dependencies stays unscheduled until its group's workflow schedules it. Each new task's
 * task-defined message (and task-pending) is written with it, and for a task with dependencies the bridge's
 * dependent-task-defined notice.
 */
export async function createTasks(
  client: pg.PoolClient,
  config: Config,
  tasks: { taskId: string; definition: TaskDefinition }[],
): Promise<TaskStatus[]> {
  const ids = tasks.map((t) => t.taskId);
  const now = new Date();

  // Existing tasks: identical → fine, different → conflict. Ids first: a new graph's fresh slugids then
  // cost one index probe each instead of shipping every definition to Postgres for comparison. The statements a
  // createTask makes are named (`prepared`): unnamed, Postgres planned each at every call, 0.15 ms of a createTask's
  // ~0.45 ms of statement time (pg_stat_statements).
  const existing = new Set<string>();
  for (let i = 0; i < ids.length; i += CHUNK) {
    for (const id of await existingTaskIds(client, ids.slice(i, i + CHUNK))) existing.add(id);
  }
  const repeated = tasks.filter((t) => existing.has(t.taskId));
  for (let i = 0; i < repeated.length; i += CHUNK) {
    const chunk = repeated.slice(i, i + CHUNK);
    const { rows } = await client.query<{ task_id: string }>(
      `SELECT t.task_id FROM jsonb_to_recordset($1::jsonb) AS v(task_id text, definition jsonb) JOIN tasks t USING (task_id)
       WHERE t.definition <> v.definition`,
      [JSON.stringify(chunk.map((t) => ({ task_id: t.taskId, definition: t.definition })))],
    );
    if (rows.length > 0) {
      throw new TgsError('RequestConflict', `task ${rows.slice(0, 10).map((r) => r.task_id).join(', ')} already exists with a different definition`);
    }
  }
  const fresh = tasks.filter((t) => !existing.has(t.taskId));
  const created = new Map<string, TaskRow>();
  if (fresh.length > 0) {
    // The rows about to be inserted, built in memory rather than read back.
    const rows = fresh.map((t) => freshRow(t.taskId, t.definition, true, now));
    rows.forEach((r) => created.set(r.task_id, r));
    const messages = rows.map((r) => taskMessage(config, 'task-defined', r));
    fresh.forEach((t, i) => {
      if (t.definition.dependencies.length > 0) messages.push(dependentTaskDefinedMessage(config, rows[i]));
    });
    for (const r of rows) if (r.state === 'pending') messages.push(taskMessage(config, 'task-pending', r, 0));
    // The messages go first and the tasks last: inserting the tasks locks their group's row (its upsert) until the
    // commit, and the tasks of one group (a decision task's, created 50 at a time) wait for each other on that lock.
    // Written after the messages, it is held for the commit's round trip alone instead of the outbox's too.
    for (let i = 0; i < messages.length; i += CHUNK) await enqueueMessages(client, messages.slice(i, i + CHUNK));
    await insertNewTasks(client, fresh, { scheduleIndependent: true, dependenciesKnown: false, now, groupExpiresSlack: GROUP_EXPIRES_SLACK });
    await notifyPending(client, rows.filter((r) => r.state === 'pending').map((r) => `${r.provisioner_id}/${r.worker_type}`));
  }
  const byId = created;
  const stored = [...existing];
  for (let i = 0; i < stored.length; i += CHUNK) {
    for (const r of await loadTasks(client, stored.slice(i, i + CHUNK))) byId.set(r.task_id, r);
  }
  return ids.map((id) => taskStatus(byId.get(id) as TaskRow));
}
