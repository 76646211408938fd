import { declare, type JsonSchema } from '../../api/endpoint.js';
import { SLUGID } from '../../api/patterns.js';
import { TgsError } from '../../errors.js';
import { QUEUE_STATE_CHAR, type GraphRow } from '../graphStore.js';
import type { QueueTaskState } from '../../workflows/contract.js';
import { graphStatusSchema } from '../graphSchema.js';
import { graphStatus } from './shapes.js';

/**
 * The compact shapes the graph explorer (src/ui) reads: arrays per field, never an object per task, so a
 * 100,000-task graph is a few MB of JSON that parses in tens of milliseconds.
 */


/** A task's state and latest run, as the nodes and changes answers carry it. */
export interface TaskStateRow {
  task_id: string;
  state: string | null;
  runs: number | null;
  started: string | null;
  resolved: string | null;
}

/** Columns of TaskStateRow from `tasks t` (LEFT JOINed rows give NULLs). */
export const TASK_STATE_COLUMNS = `t.state, jsonb_array_length(t.runs) AS runs,
  t.runs -> -1 ->> 'started' AS started, t.runs -> -1 ->> 'resolved' AS resolved`;

/** Arrays of task states: times are ms after `timeBase` (the graph's creation), null when absent. */
export function encodeStates(rows: TaskStateRow[], timeBase: number) {
  const time = (iso: string | null) => (iso ? Date.parse(iso) - timeBase : null);
  return {
    taskIds: rows.map((r) => r.task_id).join(''),
    // one character per state (as the workflow loads them); '-' for a node whose task does not exist (yet)
    states: rows.map((r) => (r.state ? QUEUE_STATE_CHAR[r.state as QueueTaskState] : '-')).join(''),
    runs: rows.map((r) => r.runs ?? 0),
    started: rows.map((r) => time(r.started)),
    resolved: rows.map((r) => time(r.resolved)),
  };
}

const nullableInts = { type: 'array', items: { type: ['integer', 'null'] } };

export const stateArraysSchema: Record<string, JsonSchema> = {
  taskIds: { type: 'string', description: 'the taskIds, 22 characters each, concatenated' },
  states: { type: 'string', description: "one character per task: u p r c f e (unscheduled … exception), '-' missing" },
  runs: { type: 'array', items: { type: 'integer' }, description: 'number of runs' },
  started: { ...nullableInts, description: 'latest run started, ms after timeBase' },
  resolved: { ...nullableInts, description: 'latest run resolved, ms after timeBase' },
};

/** The graph-level fields every explorer answer starts with. */
export function graphHeader(row: GraphRow & { cursor: string }) {
  return {
    status: graphStatus(row),
    cursor: row.cursor,
    taskCount: row.task_count,
    nodeCount: row.node_count,
    blockedBy: row.blocked_by,
    timeBase: row.created.getTime(),
  };
}

export const graphHeaderSchema: Record<string, JsonSchema> = {
  status: graphStatusSchema,
  cursor: { type: 'string', description: 'pass as `since` to the changes endpoint' },
  taskCount: { type: 'integer' },
  nodeCount: { type: 'integer' },
  blockedBy: { type: 'array', items: { type: 'string' } },
  timeBase: { type: 'integer', description: 'the graph creation time, ms since the epoch' },
};

const nodesOutput: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: [...Object.keys(graphHeaderSchema), 'fromIdx', 'members', 'labels', 'requireCounts', 'requires', ...Object.keys(stateArraysSchema)],
  properties: {
    ...graphHeaderSchema,
    fromIdx: { type: 'integer' },
    members: { type: 'string', description: "'1' for a task of the graph, '0' for an external task it depends on" },
    labels: { type: 'array', items: { type: 'string' }, description: "labels ('' for external tasks)" },
    requireCounts: { type: 'array', items: { type: 'integer' } },
    requires: { type: 'array', items: { type: 'integer' }, description: 'node indexes each node requires, concatenated (CSR)' },
    ...stateArraysSchema,
  },
};

export const taskGraphNodesEndpoint = declare({
  service: 'scheduler',
  name: 'taskGraphNodes',
  title: 'Task-Graph Nodes (compact)',
  description: [
    'The nodes of a graph from `fromIdx` on, in node order, as arrays (what the graph explorer draws): taskIds,',
    'labels, membership, requires (node indexes, CSR), and each task\'s state and latest run times, read in one',
    'snapshot whose `cursor` is where the changes endpoint continues. External nodes are tasks of other groups',
    'that members depend on.',
  ].join(' '),
  method: 'get',
  route: '/task-graph/<taskGraphId>/nodes',
  params: { taskGraphId: SLUGID },
  query: { fromIdx: /^[0-9]{1,9}$/ },
  output: nodesOutput,
  async handler({ params, query, deps }) {
    const fromIdx = Number(query.fromIdx ?? 0);
    // One REPEATABLE READ transaction: the graph row, the nodes and the cursor share one snapshot.
    const client = await deps.pool.connect();
    try {
      await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
      const { rows: graphs } = await client.query<GraphRow & { cursor: string }>(
        'SELECT *, pg_current_snapshot()::text AS cursor FROM task_graphs WHERE task_graph_id = $1',
        [params.taskGraphId],
      );
      if (!graphs[0]) throw new TgsError('ResourceNotFound', `task-graph ${params.taskGraphId} not found`);
      const { rows } = await client.query<TaskStateRow & { member: boolean; label: string | null; requires: number[] }>(
        `SELECT n.task_id, n.member, n.label, n.requires, ${TASK_STATE_COLUMNS}
         FROM graph_nodes n LEFT JOIN tasks t ON t.task_id = n.task_id
         WHERE n.task_graph_id = $1 AND n.idx >= $2 ORDER BY n.idx`,
        [params.taskGraphId, fromIdx],
      );
      await client.query('COMMIT');
      const header = graphHeader(graphs[0]);
      return {
        ...header,
        fromIdx,
        members: rows.map((r) => (r.member ? '1' : '0')).join(''),
        labels: rows.map((r) => (r.member ? (r.label ?? r.task_id) : '')),
        requireCounts: rows.map((r) => r.requires.length),
        requires: rows.flatMap((r) => r.requires),
        ...encodeStates(rows, header.timeBase),
      };
    } catch (err) {
      await client.query('ROLLBACK').catch(() => undefined);
      throw err;
    } finally {
      client.release();
    }
  },
});
