import type pg from 'pg';
import { anyOf, prepared, type Queryable, type StatementPart } from '../db/pool.js';
import type { GraphMeta, GraphState, NodePage, QueueTaskState } from '../workflows/contract.js';
import { MISSING_TASK_CHAR, TASK_STATE_CHAR } from '../taskStates.js';
import { TgsError } from '../errors.js';
import { hasCacheRowSql } from '../taskCache/store.js';

export interface GraphRow {
  task_graph_id: string;
  scheduler_id: string;
  routing: string;
  /** the graph's routes: its scheduler messages' CC keys `route.<route>` (migration 035) */
  routes: string[];
  /** the clientId that submitted it ('' when unknown: migration 039) */
  submitted_by: string;
  state: GraphState;
  origin: 'graph' | 'queue';
  graph_hash: string | null;
  scopes: string[];
  metadata: Record<string, string>;
  tags: Record<string, string>;
  node_count: number;
  task_count: number;
  blocked_by: string[];
  /** who ended the graph and why (canceled, terminated); null otherwise (migration 032) */
  state_reason: string | null;
  /** how many times the graph's workflow was started again after it closed (migration 033) */
  resumes: number;
  created: Date;
  updated: Date;
}

export async function getGraph(db: Queryable, taskGraphId: string, forUpdate = false): Promise<GraphRow | undefined> {
  const { rows } = await db.query<GraphRow>(
    `SELECT * FROM task_graphs WHERE task_graph_id = $1${forUpdate ? ' FOR UPDATE' : ''}`,
    [taskGraphId],
  );
  return rows[0];
}

/** The graph row, or 404 ResourceNotFound for the API. */
export async function requireGraph(db: Queryable, taskGraphId: string): Promise<GraphRow> {
  const row = await getGraph(db, taskGraphId);
  if (!row) throw new TgsError('ResourceNotFound', `task-graph ${taskGraphId} not found`);
  return row;
}

export function graphMeta(row: GraphRow): GraphMeta {
  return {
    taskGraphId: row.task_graph_id,
    schedulerId: row.scheduler_id,
    routing: row.routing,
    nodeCount: row.node_count,
    state: row.state,
    origin: row.origin,
  };
}

/** Label → {taskId, idx} of a graph's members (for extend, and for answers by label). */
export async function memberIndex(db: Queryable, taskGraphId: string): Promise<Map<string, { taskId: string; idx: number }>> {
  const { rows } = await db.query<{ label: string; task_id: string; idx: number }>(
    'SELECT label, task_id, idx FROM graph_nodes WHERE task_graph_id = $1 AND member',
    [taskGraphId],
  );
  return new Map(rows.map((r) => [r.label, { taskId: r.task_id, idx: r.idx }]));
}

/**
 * Of the taskIds $2, those that are members of the graph $1: found by taskId (graph_nodes_by_task), the graph compared
 * after. `task_graph_id || ''` keeps the graph id from choosing the plan: as an index condition Postgres planned each
 * call for the graph at hand, and a graph created since the table was last analyzed looks like a few nodes, so every
 * dispatch of the 100,000-task graph read all its members (120 ms a call, 75 s of the run's Postgres time).
 */
export const GRAPH_MEMBERS_SQL = `SELECT task_id FROM graph_nodes WHERE task_id = ${anyOf('$2', 'text')} AND task_graph_id || '' = $1 AND member`;

/**
 * GRAPH_MEMBERS_SQL with whether each member is a cached node (has a task_cache row), for a dispatch: it reads the
 * cache's rows only when a task it schedules is one, instead of a read of task_cache every dispatch.
 */
export const DISPATCH_MEMBERS_SQL = `SELECT n.task_id, ${hasCacheRowSql('n.task_id')} AS cached,
  n.cutoff IS NOT NULL AND NOT n.cutoff ? 'outcome' AS cutoff FROM graph_nodes n
  WHERE n.task_id = ${anyOf('$2', 'text')} AND n.task_graph_id || '' = $1 AND n.member`;

/**
 * SQL over `m`, a row of DISPATCH_MEMBERS_SQL: whether this member, once ready, is dispatched by the activity's
 * general path (src/activities/index.ts dispatchTasks: a cached node is looked up in the cache, and an amend's
 * dependent with an undecided early cutoff is decided, before anything is scheduled) instead of its one statement
 * (src/activities/dispatchInOne.ts).
 */
export const needsGeneralDispatchSql = (m: string) => `(${m}.cached OR ${m}.cutoff)`;

/**
 * The live graphs (running or blocked, or a task group's queue-level graph) that have any of the taskIds $1 as a
 * node, member or external: who hears a resolution. Driven by taskId (graph_nodes_by_task), each node's graph found
 * after by its key; `task_graph_id || ''` keeps Postgres from reading the live graphs first and each one's nodes
 * through (task_graph_id, task_id) with the taskIds as a filter. It planned that way with autovacuum on, once
 * `graph_nodes` had been vacuumed after a 100,000-task graph was stored but not yet analyzed: each flush of the
 * bridge tested all 100,000 nodes against its taskIds (0.7 s a call, against 0.8 ms by taskId), and the graph ran
 * at 501 tasks/s instead of 750 (docs/bench-journal/2026-11-26.md).
 */
export const GRAPHS_HEARING_SQL = `SELECT n.task_graph_id, n.task_id, g.origin FROM graph_nodes n JOIN task_graphs g ON g.task_graph_id = n.task_graph_id || ''
  WHERE n.task_id = ${anyOf('$1', 'text')} AND (g.state IN ('running', 'blocked') OR g.origin = 'queue')`;

/** A node of a live graph, with its graph's origin: one row of GRAPHS_HEARING_SQL. */
export interface HearingNode {
  task_graph_id: string;
  task_id: string;
  origin: string;
}

/** The graphs that hear resolutions of these tasks: each node of theirs with its graph (GRAPHS_HEARING_SQL). */
export async function graphsHearing(db: Queryable, taskIds: string[]): Promise<HearingNode[]> {
  if (taskIds.length === 0) return [];
  return (await db.query<HearingNode>(prepared(GRAPHS_HEARING_SQL, [taskIds]))).rows;
}

/** A task defined with queue-level dependencies that no graph has as a member yet, and the group it joins. */
export interface JoiningTask {
  task_id: string;
  task_group_id: string;
}

/**
 * Of these tasks, those created with dependencies (queue-level: createTask with `dependencies`) that are not yet a
 * member of a graph: each joins its group's workflow (the bridge signals it `tasksDefined`).
 */
export async function tasksJoiningGroups(db: Queryable, taskIds: string[]): Promise<JoiningTask[]> {
  if (taskIds.length === 0) return [];
  const { rows } = await db.query<JoiningTask>(
    prepared(
      `SELECT t.task_id, t.task_group_id FROM tasks t
       WHERE t.task_id = ANY($1)
         AND EXISTS (SELECT 1 FROM task_dependencies d WHERE d.dependent_task_id = t.task_id)
         AND NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.task_id = t.task_id AND n.member)`,
      [taskIds],
    ),
  );
  return rows;
}

/** Which of these taskIds are member tasks of the graph (activities act on nothing else, whatever they are told). */
export async function memberTaskIds(db: Queryable, taskGraphId: string, taskIds: string[]): Promise<Set<string>> {
  if (taskIds.length === 0) return new Set();
  const { rows } = await db.query<{ task_id: string }>(
    prepared(GRAPH_MEMBERS_SQL, [taskGraphId, taskIds]),
  );
  return new Set(rows.map((r) => r.task_id));
}

/**
 * Which of these taskIds are member tasks of the graph, which of those are cached nodes, and which wait for an early
 * cutoff's decision (DISPATCH_MEMBERS_SQL).
 */
export async function dispatchMembers(
  db: Queryable,
  taskGraphId: string,
  taskIds: string[],
): Promise<{ members: Set<string>; cached: Set<string>; cutoff: Set<string> }> {
  if (taskIds.length === 0) return { members: new Set(), cached: new Set(), cutoff: new Set() };
  const { rows } = await db.query<{ task_id: string; cached: boolean; cutoff: boolean }>(prepared(DISPATCH_MEMBERS_SQL, [taskGraphId, taskIds]));
  return {
    members: new Set(rows.map((r) => r.task_id)),
    cached: new Set(rows.filter((r) => r.cached).map((r) => r.task_id)),
    cutoff: new Set(rows.filter((r) => r.cutoff).map((r) => r.task_id)),
  };
}

/** A member node as stored: its requires as idx of other nodes of the graph. */
export interface MemberNodeRow {
  idx: number;
  taskId: string;
  label: string;
  requires: number[];
  requiresMode: number;
  reruns: number;
  /** hex digests of the node's definition (src/scheduler/nodeDigests.ts, migration 037) */
  digest: string;
  workDigest: string;
  /** the node as submitted, validated (migration 041): what the graph's current file gives back */
  source: unknown;
}

/**
 * The INSERT of member nodes (for the caller to run in its transaction, which holds the graph row, or its advisory lock
 * for a new graph), its parameters numbered from `$first`. Their idx may leave gaps for labels named but not yet
 * defined: the caller fills them before commit and then sets the counts with `setNodeCounts`. jsonb_to_recordset
 * takes a chunk of nodes in one statement; per-row INSERTs would be ~100x slower.
 */
export function memberNodesInsert(taskGraphId: string, nodes: MemberNodeRow[], first: number): StatementPart {
  return {
    sql: `INSERT INTO graph_nodes (task_graph_id, idx, task_id, member, label, requires, requires_mode, reruns, reruns_left, digest, work_digest, source)
         SELECT $${first}, r.idx, r.task_id, true, r.label,
                r.requires, r.requires_mode, r.reruns, r.reruns, decode(r.digest, 'hex'), decode(r.work_digest, 'hex'), r.source
         FROM jsonb_to_recordset($${first + 1}::jsonb) AS r(idx int, task_id text, label text, requires int[], requires_mode smallint, reruns int,
                                                         digest text, work_digest text, source jsonb)`,
    params: [
      taskGraphId,
      JSON.stringify(nodes.map((n) => ({ idx: n.idx, task_id: n.taskId, label: n.label, requires: n.requires, requires_mode: n.requiresMode, reruns: n.reruns, digest: n.digest, work_digest: n.workDigest, source: n.source }))),
    ],
  };
}

/** After the members of a create or extend are stored: the graph's node count and its tasks added. */
export async function setNodeCounts(client: pg.PoolClient, taskGraphId: string, nodeCount: number, tasksAdded: number): Promise<void> {
  await client.query('UPDATE task_graphs SET node_count = $2, task_count = task_count + $3, updated = now() WHERE task_graph_id = $1', [
    taskGraphId,
    nodeCount,
    tasksAdded,
  ]);
}

/** Nodes [fromIdx, fromIdx+limit) in the compact form the workflow loads. */
/** Stores how many automatic reruns each of these nodes has left (a node is named by its idx and taskId). */
export async function setRerunsLeft(db: Queryable, taskGraphId: string, nodes: { idx: number; taskId: string; rerunsLeft: number }[]): Promise<void> {
  if (nodes.length === 0) return;
  await db.query(
    `UPDATE graph_nodes n SET reruns_left = v.reruns_left
     FROM jsonb_to_recordset($2::jsonb) AS v(idx int, task_id text, reruns_left int)
     WHERE n.task_graph_id = $1 AND n.idx = v.idx AND n.task_id = v.task_id`,
    [taskGraphId, JSON.stringify(nodes.map((n) => ({ idx: n.idx, task_id: n.taskId, reruns_left: n.rerunsLeft })))],
  );
}

/** Records the state the graph's workflow published (and the first 1000 tasks blocking it, and who ended it). */
export async function recordGraphState(db: Queryable, taskGraphId: string, state: GraphState, blockedBy: string[], reason?: string): Promise<void> {
  await db.query(
    // workflow_started: the sweep that starts missing workflows (src/scheduler/missingWorkflows.ts) skips it now
    // a state announced again without a reason (a reset run ending a canceled graph once more) keeps who ended it
    `UPDATE task_graphs SET state = $2, blocked_by = $3, state_reason = COALESCE($4, CASE WHEN state = $2 THEN state_reason END),
       workflow_started = true, updated = now() WHERE task_graph_id = $1`,
    [taskGraphId, state, blockedBy.slice(0, 1000), reason?.slice(0, 2000) ?? null],
  );
}

export async function loadNodePage(db: Queryable, taskGraphId: string, fromIdx: number, limit: number, withQueueState: boolean): Promise<NodePage> {
  const { rows } = await db.query<{
    idx: number;
    task_id: string;
    member: boolean;
    label: string | null;
    requires: number[];
    requires_mode: number;
    reruns_left: number;
    state: QueueTaskState | null;
    latest_run: number | null;
  }>(
    `SELECT n.idx, n.task_id, n.member, n.label, n.requires, n.requires_mode, n.reruns_left,
            ${withQueueState ? 't.state, jsonb_array_length(t.runs) - 1 AS latest_run' : 'NULL AS state, NULL AS latest_run'}
     FROM graph_nodes n ${withQueueState ? 'LEFT JOIN tasks t ON t.task_id = n.task_id' : ''}
     WHERE n.task_graph_id = $1 AND n.idx >= $2 AND n.idx < $3
     ORDER BY n.idx`,
    [taskGraphId, fromIdx, fromIdx + limit],
  );
  rows.forEach((r, k) => {
    if (r.idx !== fromIdx + k) throw new Error(`graph ${taskGraphId} has a gap at node ${fromIdx + k}`);
  });
  const page: NodePage = {
    fromIdx,
    taskIds: rows.map((r) => r.task_id).join(''),
    members: rows.map((r) => (r.member ? '1' : '0')).join(''),
    modes: rows.map((r) => String(r.requires_mode)).join(''),
    requireCounts: rows.map((r) => r.requires.length),
    requires: rows.flatMap((r) => r.requires),
    rerunsLeft: rows.map((r) => r.reruns_left),
    labels: rows.map((r) => (r.member && r.label !== r.task_id ? (r.label ?? '') : '')),
  };
  if (withQueueState) {
    page.queueStates = rows.map((r) => (r.state ? TASK_STATE_CHAR[r.state] : MISSING_TASK_CHAR)).join('');
    page.latestRuns = rows.map((r) => r.latest_run ?? -1);
  }
  return page;
}

/**
 * Creates the graph row of a task group that uses queue-level dependencies (no-op if it exists). Only such a group
 * becomes a graph: a workflow started on Temporal with `origin: 'queue'` for any other group (plain queue tasks)
 * is refused, so access to the namespace cannot take over, and cancel, tasks that were never a graph's.
 */
export async function ensureQueueGraph(db: Queryable, taskGraphId: string): Promise<void> {
  const { rows } = await db.query<{ scheduler_id: string; has_dependencies: boolean }>(
    `SELECT g.scheduler_id,
            EXISTS (SELECT 1 FROM tasks t JOIN task_dependencies d ON d.dependent_task_id = t.task_id
                    WHERE t.task_group_id = g.task_group_id) AS has_dependencies
     FROM task_groups g WHERE g.task_group_id = $1`,
    [taskGraphId],
  );
  if (!rows[0]) throw new TgsError('ResourceNotFound', `task group ${taskGraphId} does not exist`);
  if (!rows[0].has_dependencies) {
    throw new TgsError(
      'InputError',
      `task group ${taskGraphId} has no task with queue-level dependencies, so it is no task-graph: start graphs with PUT /api/scheduler/v1/task-graph/<taskGraphId> or with the graph as the workflow's input`,
    );
  }
  await db.query(
    `INSERT INTO task_graphs (task_graph_id, scheduler_id, origin) VALUES ($1, $2, 'queue')
     ON CONFLICT (task_graph_id) DO NOTHING`,
    [taskGraphId, rows[0].scheduler_id],
  );
}

/**
 * Queue-level dependencies: makes these tasks members of their group's graph, and every task they
 * depend on that is not a node yet an external node. Idempotent. Returns the new node count.
 */
export async function joinQueueTasks(client: pg.PoolClient, taskGraphId: string, taskIds: string[]): Promise<number> {
  const graph = await getGraph(client, taskGraphId, true);
  if (!graph) throw new Error(`graph ${taskGraphId} does not exist`);
  const { rows: tasks } = await client.query<{ task_id: string; requires: string; deps: string[] }>(
    `SELECT t.task_id, t.requires,
            ARRAY(SELECT d.required_task_id FROM task_dependencies d WHERE d.dependent_task_id = t.task_id ORDER BY 1) AS deps
     FROM tasks t
     WHERE t.task_id = ANY($1) AND t.task_group_id = $2
       AND NOT EXISTS (SELECT 1 FROM graph_nodes n WHERE n.task_graph_id = $2 AND n.task_id = t.task_id)
     ORDER BY t.created, t.task_id`,
    [taskIds, taskGraphId],
  );
  if (tasks.length === 0) return graph.node_count;
  const { rows: known } = await client.query<{ task_id: string; idx: number }>(
    'SELECT task_id, idx FROM graph_nodes WHERE task_graph_id = $1 AND task_id = ANY($2)',
    [taskGraphId, tasks.flatMap((t) => t.deps)],
  );
  const idxOf = new Map(known.map((k) => [k.task_id, k.idx]));
  let next = graph.node_count;
  const members = new Set(tasks.map((t) => t.task_id));
  const rows: { idx: number; task_id: string; member: boolean; requires: number[]; requires_mode: number }[] = [];
  for (const t of tasks) {
    for (const dep of t.deps) {
      if (idxOf.has(dep) || members.has(dep)) continue;
      idxOf.set(dep, next);
      rows.push({ idx: next++, task_id: dep, member: false, requires: [], requires_mode: 0 });
    }
    idxOf.set(t.task_id, next);
    rows.push({ idx: next++, task_id: t.task_id, member: true, requires: [], requires_mode: t.requires === 'all-resolved' ? 1 : 0 });
  }
  const rowOf = new Map(rows.map((r) => [r.task_id, r]));
  for (const t of tasks) (rowOf.get(t.task_id) as (typeof rows)[number]).requires = t.deps.map((d) => idxOf.get(d) as number);
  await client.query(
    `INSERT INTO graph_nodes (task_graph_id, idx, task_id, member, label, requires, requires_mode)
     SELECT $1, r.idx, r.task_id, r.member, CASE WHEN r.member THEN r.task_id END,
            r.requires, r.requires_mode
     FROM jsonb_to_recordset($2::jsonb) AS r(idx int, task_id text, member boolean, requires int[], requires_mode smallint)`,
    [taskGraphId, JSON.stringify(rows)],
  );
  await client.query(
    `UPDATE task_graphs SET node_count = $2, task_count = task_count + $3,
            state = CASE WHEN state = 'finished' THEN 'running' ELSE state END, updated = now()
     WHERE task_graph_id = $1`,
    [taskGraphId, next, tasks.length],
  );
  return next;
}
