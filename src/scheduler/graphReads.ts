import type pg from 'pg';
import type { Queryable } from '../db/pool.js';
import { MISSING_TASK_CHAR, TASK_STATE_CHAR } from '../taskStates.js';
import { TgsError } from '../errors.js';
import type { GraphRow } from './graphStore.js';
import type { CutoffSpec } from './earlyCutoff.js';

/**
 * The scheduler API's reads of the graph tables (task_graphs, graph_nodes) joined with the queue's tasks: the list,
 * counts, inspect, and what the graph explorer reads (nodes and changes). Writes and the workflow's reads are in
 * graphStore.ts.
 */

/** A task's state and latest run, as the nodes and changes answers carry it. */
export interface TaskStateRow {
  task_id: string;
  state: string | null;
  runs: number | null;
  started: string | null;
  resolved: string | null;
  /** the latest run was reused from the cache (docs/formats.md § Cached tasks) */
  cached: boolean | null;
}

/** Columns of TaskStateRow from `tasks t` (LEFT JOINed rows give NULLs). */
const TASK_STATE_COLUMNS = `t.state, jsonb_array_length(t.runs) AS runs,
  t.runs -> -1 ->> 'started' AS started, t.runs -> -1 ->> 'resolved' AS resolved, t.runs -> -1 ? 'cachedFrom' AS cached`;

/** Where a page of the graph list resumes: after this graph, newest first. */
export interface GraphListPosition {
  createdUs: string;
  taskGraphId: string;
}

/** Up to `limit` graphs (only those in `state`, when given), newest first, after `after`. */
export async function listGraphs(
  db: Queryable,
  options: { state?: string; after?: GraphListPosition; limit: number },
): Promise<(GraphRow & { created_us: string })[]> {
  const where: string[] = [];
  const args: unknown[] = [];
  if (options.state) {
    args.push(options.state);
    where.push(`state = $${args.length}`);
  }
  if (options.after) {
    args.push(options.after.createdUs, options.after.taskGraphId);
    const created = `(timestamptz 'epoch' + $${args.length - 1}::bigint * interval '1 microsecond')`;
    where.push(`(created < ${created} OR (created = ${created} AND task_graph_id > $${args.length}))`);
  }
  args.push(options.limit);
  const { rows } = await db.query<GraphRow & { created_us: string }>(
    `SELECT *, (extract(epoch FROM created) * 1000000)::bigint::text AS created_us FROM task_graphs
     ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
     ORDER BY created DESC, task_graph_id LIMIT $${args.length}`,
    args,
  );
  return rows;
}

/** How many member tasks of each graph are in each queue state (states with none are absent). */
export async function memberStateCounts(db: Queryable, taskGraphIds: string[]): Promise<{ task_graph_id: string; state: string; count: number }[]> {
  const { rows } = await db.query<{ task_graph_id: string; state: string; count: number }>(
    `SELECT n.task_graph_id, t.state, count(*) AS count
     FROM graph_nodes n JOIN tasks t ON t.task_id = n.task_id
     WHERE n.task_graph_id = ANY($1) AND n.member GROUP BY 1, 2`,
    [taskGraphIds],
  );
  return rows;
}

/** The taskId of the graph's member task with this taskId or label. */
export async function findMemberTaskId(db: Queryable, taskGraphId: string, taskIdOrLabel: string): Promise<string | undefined> {
  const { rows } = await db.query<{ task_id: string }>(
    'SELECT task_id FROM graph_nodes WHERE task_graph_id = $1 AND member AND (task_id = $2 OR label = $2)',
    [taskGraphId, taskIdOrLabel],
  );
  return rows[0]?.task_id;
}

export interface InspectRow {
  idx: number;
  label: string;
  task_id: string;
  reruns: number;
  reruns_left: number;
  state: string | null;
  requires: string[];
  /** the first MAX_INSPECT_EDGES dependents, in node order */
  dependents: string[];
  /** how many dependents the task has */
  dependent_count: number;
  /** what the last amend did to it (graph_nodes.amended), the task it replaced, and its early cutoff */
  amended: 'c' | 'a' | 'd' | 'm' | null;
  replaces: string | null;
  cutoff: Pick<CutoffSpec, 'inputs' | 'outcome'> | null;
}

/**
 * Edges (requires + dependents) one inspect page carries, and the most dependents one task lists: a page's
 * answer and its query's cost are bounded by edges, not tasks. Paged by tasks alone, one page of a 900-task
 * graph with 180,000 edges took 5.9 s on Postgres and held a pool connection all along. A task's requires are
 * at most 10,000 (the graph schema), so a page holds at most 10,000 edges plus one task's 20,000.
 */
export const MAX_INSPECT_EDGES = 10_000;

/** The node columns of an inspect answer, with its edge lists, for the rows of `n` (aliased) that pass `keep`. */
const inspectColumns = (keep: string) => `
  n.idx, n.label, n.task_id, n.reruns, n.reruns_left, t.state, n.dependent_count, n.amended::text AS amended, n.cutoff,
  CASE WHEN n.amended IN ('c', 'd') THEN (SELECT o.task_id FROM graph_nodes o
       WHERE o.task_graph_id = n.task_graph_id AND o.superseded_by = n.idx LIMIT 1) END AS replaces,
  CASE WHEN ${keep} THEN ARRAY(SELECT coalesce(r.label, r.task_id) FROM graph_nodes r
       WHERE r.task_graph_id = n.task_graph_id AND r.idx = ANY(n.requires) ORDER BY r.idx) END AS requires,
  CASE WHEN ${keep} THEN ARRAY(SELECT coalesce(d.label, d.task_id) FROM task_dependencies td
       JOIN graph_nodes d ON d.task_graph_id = n.task_graph_id AND d.task_id = td.dependent_task_id
       WHERE td.required_task_id = n.task_id ORDER BY d.idx LIMIT ${MAX_INSPECT_EDGES}) END AS dependents`;

const DEPENDENT_COUNT = '(SELECT count(*)::int FROM task_dependencies td WHERE td.required_task_id = n.task_id)';

/**
 * Member tasks with node index after `afterIdx`, in node order, with their requires and dependents: at most
 * `limit` tasks, and no task past the first whose edges would take the page beyond MAX_INSPECT_EDGES (the
 * first always comes). `more`: whether member tasks are left after the page.
 */
export async function inspectNodes(db: Queryable, taskGraphId: string, afterIdx: number, limit: number): Promise<{ rows: InspectRow[]; more: boolean }> {
  const { rows } = await db.query<InspectRow & { kept: boolean }>(
    `WITH page AS (
       SELECT n.*, ${DEPENDENT_COUNT} AS dependent_count FROM graph_nodes n
       WHERE n.task_graph_id = $1 AND n.member AND n.idx > $2 ORDER BY n.idx LIMIT $3
     ), weighed AS (
       SELECT page.*, cardinality(requires) + least(dependent_count, ${MAX_INSPECT_EDGES}) AS edges FROM page
     ), budgeted AS (
       SELECT weighed.*, sum(edges) OVER (ORDER BY idx) - edges AS edges_before, row_number() OVER (ORDER BY idx) AS nth
       FROM weighed
     ), n AS (
       SELECT budgeted.*, (nth = 1 OR edges_before < $4) AND nth < $3 AS kept FROM budgeted
     )
     SELECT n.kept, ${inspectColumns('n.kept')} FROM n LEFT JOIN tasks t ON t.task_id = n.task_id ORDER BY n.idx`,
    [taskGraphId, afterIdx, limit + 1, MAX_INSPECT_EDGES],
  );
  const kept = rows.filter((r) => r.kept);
  return { rows: kept.map(({ kept: _, ...row }) => row), more: kept.length < rows.length };
}

/** One member task, by taskId or label. */
export async function inspectNode(db: Queryable, taskGraphId: string, taskIdOrLabel: string): Promise<InspectRow | undefined> {
  const { rows } = await db.query<InspectRow>(
    `SELECT ${inspectColumns('true')} FROM (SELECT n.*, ${DEPENDENT_COUNT} AS dependent_count FROM graph_nodes n
       WHERE n.task_graph_id = $1 AND n.member AND (n.task_id = $2 OR n.label = $2) LIMIT 1) n
     LEFT JOIN tasks t ON t.task_id = n.task_id`,
    [taskGraphId, taskIdOrLabel],
  );
  return rows[0];
}

/** The graph row with the snapshot it was read in (`cursor`: where the changes feed continues). */
/** The graph row as the explorer's reads give it: with their snapshot as a cursor, and how many amends it had. */
export type GraphSnapshotRow = GraphRow & { cursor: string; amends: number };

/**
 * The number of the graph's last amend (0 before any): a page that drew the graph reloads it when this grows, as an
 * amend changes nodes already shown even when it adds none (a patch, a rerun of what was drawn). One probe of
 * graph_amends' primary key; every amend also touches the graph row, so a waiting changes request wakes for it.
 */
const AMENDS_COLUMN = '(SELECT coalesce(max(a.seq), 0) FROM graph_amends a WHERE a.task_graph_id = g.task_graph_id)::int AS amends';

/** A graph's nodes as the compact answer's pieces, each already in its JSON form (see readNodes). */
export interface EncodedNodes {
  /** how many nodes */
  count: number;
  /** the taskIds, 22 characters each, concatenated */
  taskIds: string;
  /** '1' for a member, '0' for an external node */
  members: string;
  /** a JSON array of strings: the label of each member and superseded node ('' for external nodes) */
  labels: string;
  /** comma-separated: how many nodes each node requires */
  requireCounts: string;
  /** comma-separated: the idx of each required node, concatenated in node order (CSR) */
  requires: string;
  /** one character per node (TASK_STATE_CHAR), MISSING_TASK_CHAR where the task does not exist (yet) */
  states: string;
  /** comma-separated: number of runs */
  runs: string;
  /** comma-separated: latest run started / resolved, ms after `timeBase`, `null` when absent */
  started: string;
  resolved: string;
  /** '1' where the latest run was reused from the cache, else '0' */
  cached: string;
  /** one character per node: what the last amend did to it (AMEND_MARK_SQL) */
  amend: string;
}

const STATE_CHAR_SQL = `CASE state ${Object.entries(TASK_STATE_CHAR)
  .map(([state, ch]) => `WHEN '${state}' THEN '${ch}'`)
  .join(' ')} ELSE '${MISSING_TASK_CHAR}' END`;

/**
 * What the last amend did to a node (the nodes answer's `amend`): 's' superseded, 'k' a dependent the early cutoff
 * kept, else graph_nodes.amended ('c', 'a', 'd', 'm'), '-' for none.
 */
const AMEND_MARK_SQL = `CASE WHEN superseded_by IS NOT NULL THEN 's' WHEN amended = 'd' AND cutoff -> 'outcome' ->> 'kept' = 'true' THEN 'k'
  ELSE coalesce(amended::text, '-') END`;

/** ms after $3 (the graph's timeBase) of a run's time, as JSON text. */
const runTimeSql = (field: 'started' | 'resolved') =>
  `coalesce((floor(extract(epoch FROM (runs -> -1 ->> '${field}')::timestamptz) * 1000) - $3)::bigint::text, 'null')`;

/**
 * The nodes from $2 on, with their tasks' states, aggregated into one row of strings in node order. Members
 * are tasks of the graph's group (createTaskGraph, extendTaskGraph and a createTask into the group all keep
 * them so), so their states are a hash join with the group's tasks (`tasks_group`); external nodes, few, are
 * looked up by taskId. The aggregates read a subquery sorted by idx: PostgreSQL aggregates in input order (the
 * documented alternative to ORDER BY in each aggregate, which on PostgreSQL 15 sorted the 100,000 rows once per
 * aggregate, ten times: 0.7–1.2 s against 0.3–0.6 s).
 */
export const ENCODED_NODES_SQL = `SELECT count(*)::int AS count,
  coalesce(string_agg(task_id, ''), '') AS "taskIds",
  coalesce(string_agg(CASE WHEN member THEN '1' ELSE '0' END, ''), '') AS members,
  coalesce(json_agg(CASE WHEN member OR superseded_by IS NOT NULL THEN coalesce(label, task_id) ELSE '' END)::text, '[]') AS labels,
  coalesce(string_agg(cardinality(requires)::text, ','), '') AS "requireCounts",
  coalesce(string_agg(array_to_string(requires, ','), ',') FILTER (WHERE cardinality(requires) > 0), '') AS requires,
  coalesce(string_agg(${STATE_CHAR_SQL}, ''), '') AS states,
  coalesce(string_agg(coalesce(jsonb_array_length(runs), 0)::text, ','), '') AS runs,
  coalesce(string_agg(${runTimeSql('started')}, ','), '') AS started,
  coalesce(string_agg(${runTimeSql('resolved')}, ','), '') AS resolved,
  coalesce(string_agg(CASE WHEN runs -> -1 ? 'cachedFrom' THEN '1' ELSE '0' END, ''), '') AS cached,
  coalesce(string_agg(${AMEND_MARK_SQL}, ''), '') AS amend
FROM (
  SELECT idx, task_id, member, label, requires, state, runs, superseded_by, amended, cutoff FROM (
    SELECT n.idx, n.task_id, n.member, n.label, n.requires, t.state, t.runs, n.superseded_by, n.amended, n.cutoff
    FROM graph_nodes n LEFT JOIN tasks t ON t.task_id = n.task_id AND t.task_group_id = $1
    WHERE n.task_graph_id = $1 AND n.idx >= $2 AND n.member
    UNION ALL
    SELECT n.idx, n.task_id, n.member, n.label, n.requires, t.state, t.runs, n.superseded_by, n.amended, n.cutoff
    FROM graph_nodes n LEFT JOIN LATERAL (SELECT state, runs FROM tasks WHERE task_id = n.task_id LIMIT 1) t ON true
    WHERE n.task_graph_id = $1 AND n.idx >= $2 AND NOT n.member
  ) u ORDER BY idx
) s`;

/** Settings of the transaction that reads ENCODED_NODES_SQL for a graph of `nodeCount` nodes. */
export async function setUpNodesRead(client: pg.PoolClient, nodeCount: number): Promise<void> {
  // The members' states are read as one hash join with the group's tasks, whatever the statistics say: a graph
  // stored since `tasks` was last analyzed looks like a group of a few tasks, and the nested loop planned for that
  // scanned the whole group once per node (a 10,000-task graph's nodes: 2.7-3.5 s, 26-33 ms hashed). External nodes
  // are still looked up one by one (their LATERAL has no other plan).
  await client.query('SET LOCAL enable_nestloop = off');
  // The sort of a 100,000-node graph needs 16 MB; in the default 4 MB it spilled to disk. The API runs at most 4 of
  // these reads at once by default (TGS_MAX_CONCURRENT_GRAPH_NODES).
  if (nodeCount > 10_000) {
    await client.query("SET LOCAL work_mem = '64MB'");
    await client.query('SET LOCAL jit = off');
  }
}

/**
 * The graph row and its nodes from `fromIdx` on, in node order, read in one snapshot; 404 for no such graph.
 *
 * Postgres encodes the nodes (ENCODED_NODES_SQL): one row of ten strings instead of a row per node, which
 * node-pg turned into an object each — on the 100,000-task graph opened right after its submit, those rows took
 * the API 2 s while the scheduler worker and the relay were busy with the same graph (docs/bench-journal/2026-11-24.md).
 */
export async function readNodes(pool: pg.Pool, taskGraphId: string, fromIdx: number): Promise<{ graph: GraphSnapshotRow; nodes: EncodedNodes }> {
  // One REPEATABLE READ transaction: the graph row, the nodes, their states and the cursor share one snapshot.
  const client = await pool.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const { rows: graphs } = await client.query<GraphSnapshotRow>(
      `SELECT g.*, pg_current_snapshot()::text AS cursor, ${AMENDS_COLUMN} FROM task_graphs g WHERE g.task_graph_id = $1`,
      [taskGraphId],
    );
    const graph = graphs[0];
    if (!graph) throw new TgsError('ResourceNotFound', `task-graph ${taskGraphId} not found`);
    await setUpNodesRead(client, graph.node_count);
    const { rows } = await client.query<EncodedNodes>(ENCODED_NODES_SQL, [taskGraphId, fromIdx, graph.created.getTime()]);
    await client.query('COMMIT');
    return { graph, nodes: rows[0] };
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    client.release();
  }
}

/**
 * One statement, so one snapshot: the graph row, the tasks of the graph whose state changed in a transaction
 * not visible in `since` (see src/sql/014_ui_changes.sql), and this snapshot as the next cursor. External nodes
 * (tasks of other groups) are found through graph_nodes_external.
 */
const CHANGES_SQL = `
  SELECT g.*, pg_current_snapshot()::text AS cursor, ${AMENDS_COLUMN},
         (g.change_xid IS NOT NULL AND NOT pg_visible_in_snapshot(g.change_xid, $2::pg_snapshot)) AS graph_changed,
         (SELECT coalesce(json_agg(c), '[]') FROM (
            SELECT t.task_id, ${TASK_STATE_COLUMNS} FROM tasks t
            WHERE t.task_group_id = $1 AND t.change_xid IS NOT NULL
              AND t.change_xid >= pg_snapshot_xmin($2::pg_snapshot) AND NOT pg_visible_in_snapshot(t.change_xid, $2::pg_snapshot)
            UNION ALL
            SELECT t.task_id, ${TASK_STATE_COLUMNS} FROM graph_nodes n JOIN tasks t ON t.task_id = n.task_id
            WHERE n.task_graph_id = $1 AND NOT n.member AND t.task_group_id <> $1 AND t.change_xid IS NOT NULL
              AND t.change_xid >= pg_snapshot_xmin($2::pg_snapshot) AND NOT pg_visible_in_snapshot(t.change_xid, $2::pg_snapshot)
         ) c) AS changes
  FROM task_graphs g WHERE g.task_graph_id = $1`;

/** Without `since`: the graph and the current cursor only. */
const CURRENT_SQL = `SELECT g.*, pg_current_snapshot()::text AS cursor, ${AMENDS_COLUMN}, false AS graph_changed, '[]'::json AS changes
  FROM task_graphs g WHERE g.task_graph_id = $1`;

export type ChangesRow = GraphSnapshotRow & { graph_changed: boolean; changes: TaskStateRow[] };

/**
 * The graph row, whether it changed, and its tasks whose state changed, since the snapshot `since` (none
 * without it); 404 for no such graph, InputError for a `since` Postgres cannot read as a snapshot.
 */
export async function readChanges(db: Queryable, taskGraphId: string, since: string | undefined): Promise<ChangesRow> {
  let row: ChangesRow | undefined;
  try {
    ({ rows: [row] } = since
      ? await db.query<ChangesRow>(CHANGES_SQL, [taskGraphId, since])
      : await db.query<ChangesRow>(CURRENT_SQL, [taskGraphId]));
  } catch (err) {
    if ((err as { code?: string }).code === '22P02') {
      throw new TgsError('InputError', `Invalid since=${since}: pass a cursor from the nodes or changes endpoint unchanged`);
    }
    throw err;
  }
  if (!row) throw new TgsError('ResourceNotFound', `task-graph ${taskGraphId} not found`);
  return row;
}
