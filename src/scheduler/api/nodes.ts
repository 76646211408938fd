import { declare, RawReply, type JsonSchema } from '../../api/endpoint.js';
import { MISSING_TASK_CHAR, TASK_STATE_CHAR } from '../../taskStates.js';
import { readNodes, type GraphSnapshotRow, type TaskStateRow } from '../graphReads.js';
import type { QueueTaskState } from '../../workflows/contract.js';
import { graphStatusSchema } from '../graphSchema.js';
import { GET_TASK_GRAPH, graphStatus } from './shapes.js';

/**
 * The compact shapes the graph explorer (src/ui) reads: arrays per field, never an object per task, so a
 * 100,000-task graph is a few MB of JSON that parses in tens of milliseconds.
 */

/** Arrays of task states: times are ms after `timeBase` (the graph's creation), null when absent. */
export function encodeStates(rows: TaskStateRow[], timeBase: number) {
  const time = (iso: string | null) => (iso ? Date.parse(iso) - timeBase : null);
  return {
    taskIds: rows.map((r) => r.task_id).join(''),
    // one character per state (as the workflow loads them); MISSING_TASK_CHAR for a node whose task does not exist (yet)
    states: rows.map((r) => (r.state ? TASK_STATE_CHAR[r.state as QueueTaskState] : MISSING_TASK_CHAR)).join(''),
    runs: rows.map((r) => r.runs ?? 0),
    started: rows.map((r) => time(r.started)),
    resolved: rows.map((r) => time(r.resolved)),
    cached: rows.map((r) => (r.cached ? '1' : '0')).join(''),
  };
}

const nullableInts = { type: 'array', items: { type: ['integer', 'null'] } };

export const stateArraysSchema: Record<string, JsonSchema> = {
  taskIds: { type: 'string', description: 'the taskIds, 22 characters each, concatenated' },
  states: { type: 'string', description: "one character per task: u p r c f e (unscheduled … exception), '-' missing" },
  runs: { type: 'array', items: { type: 'integer' }, description: 'number of runs' },
  started: { ...nullableInts, description: 'latest run started, ms after timeBase' },
  resolved: { ...nullableInts, description: 'latest run resolved, ms after timeBase' },
  cached: { type: 'string', description: "one character per task: '1' where the latest run was reused from the cache (docs/formats.md § Cached tasks)" },
};

/** The graph-level fields every explorer answer starts with. */
export function graphHeader(row: GraphSnapshotRow) {
  return {
    status: graphStatus(row),
    name: typeof row.metadata?.name === 'string' ? row.metadata.name : '',
    cursor: row.cursor,
    taskCount: row.task_count,
    nodeCount: row.node_count,
    blockedBy: row.blocked_by,
    stateReason: row.state_reason ?? '',
    timeBase: row.created.getTime(),
    amends: row.amends,
  };
}

export const graphHeaderSchema: Record<string, JsonSchema> = {
  status: graphStatusSchema,
  name: { type: 'string', description: "the graph's metadata.name, '' when it has none" },
  cursor: { type: 'string', description: 'pass as `since` to the changes endpoint' },
  taskCount: { type: 'integer' },
  nodeCount: { type: 'integer' },
  blockedBy: { type: 'array', items: { type: 'string' } },
  stateReason: { type: 'string', description: "who ended the graph and why (canceled, terminated), '' otherwise" },
  timeBase: { type: 'integer', description: 'the graph creation time, ms since the epoch' },
  amends: {
    type: 'integer',
    description: 'the number of the last amend applied to the graph, 0 before any: when it grows, nodes already read may have changed (read the nodes again)',
  },
};

const nodesOutput: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: [...Object.keys(graphHeaderSchema), 'fromIdx', 'members', 'labels', 'requireCounts', 'requires', 'amend', ...Object.keys(stateArraysSchema)],
  properties: {
    ...graphHeaderSchema,
    fromIdx: { type: 'integer' },
    members: { type: 'string', description: "'1' for a task of the graph, '0' for an external task it depends on" },
    labels: { type: 'array', items: { type: 'string' }, description: "labels ('' for external tasks; a superseded node keeps the label it had)" },
    requireCounts: { type: 'array', items: { type: 'integer' } },
    requires: { type: 'array', items: { type: 'integer' }, description: 'node indexes each node requires, concatenated (CSR)' },
    amend: {
      type: 'string',
      description:
        "one character per node, what the last amend did to it (docs/formats.md § Amend): '-' nothing, 'c' changed, 'a' added, " +
        "'d' dependent (replaced because something it requires was), 'm' metadata patched, 'k' a dependent kept by the early cutoff, " +
        "'s' superseded (an old node an amend replaced or removed; not a member)",
    },
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
  scopes: GET_TASK_GRAPH,
  query: { fromIdx: /^[0-9]{1,9}$/ },
  output: nodesOutput,
  concurrency: 'graphNodes',
  async handler({ params, query, deps }) {
    const fromIdx = Number(query.fromIdx ?? 0);
    const { graph, nodes } = await readNodes(deps.pool, params.taskGraphId, fromIdx);
    // The arrays arrive from Postgres in their JSON form (readNodes): spliced, not parsed and serialized again.
    const head = JSON.stringify({ ...graphHeader(graph), fromIdx, taskIds: nodes.taskIds, members: nodes.members, states: nodes.states, cached: nodes.cached, amend: nodes.amend });
    const body = `${head.slice(0, -1)},"labels":${nodes.labels},"requireCounts":[${nodes.requireCounts}],"requires":[${nodes.requires}],"runs":[${nodes.runs}],"started":[${nodes.started}],"resolved":[${nodes.resolved}]}`;
    return new RawReply(200, { 'content-type': 'application/json' }, body);
  },
});
