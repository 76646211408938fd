import { AMENDED_CLASS, cutoffNote } from '../lastAmend.js';
import { declare } from '../../api/endpoint.js';
import { TgsError } from '../../errors.js';
import { requireGraph as mustGetGraph } from '../graphStore.js';
import { inspectNode, inspectNodes, memberStateCounts, type InspectRow } from '../graphReads.js';
import { GET_TASK_GRAPH, graphStatus, statusResponseSchema } from './shapes.js';

export const pingEndpoint = declare({
  service: 'scheduler',
  name: 'ping',
  title: 'Ping Server',
  description: 'Respond without doing anything: checks that the service is up.',
  method: 'get',
  route: '/ping',
  async handler() {
    return { alive: true, uptime: process.uptime() };
  },
});

export const statusEndpoint = declare({
  service: 'scheduler',
  name: 'status',
  title: 'Task-Graph Status',
  description: "The task-graph status structure `{schedulerId, taskGraphId, state, routing}`.",
  method: 'get',
  route: '/task-graph/<taskGraphId>/status',
  scopes: GET_TASK_GRAPH,
  output: statusResponseSchema,
  async handler({ params, deps }) {
    return { status: graphStatus(await mustGetGraph(deps.pool, params.taskGraphId)) };
  },
});

export const infoEndpoint = declare({
  service: 'scheduler',
  name: 'info',
  title: 'Task-Graph Info',
  description: 'Status plus metadata, tags, scopes, task counts by queue state and the blocking tasks.',
  method: 'get',
  route: '/task-graph/<taskGraphId>/info',
  concurrency: 'graphReads',
  scopes: GET_TASK_GRAPH,
  async handler({ params, deps }) {
    const row = await mustGetGraph(deps.pool, params.taskGraphId);
    const counts = await memberStateCounts(deps.pool, [params.taskGraphId]);
    return {
      status: graphStatus(row),
      origin: row.origin,
      metadata: row.metadata,
      tags: row.tags,
      scopes: row.scopes,
      taskCount: row.task_count,
      counts: Object.fromEntries(counts.map((r) => [r.state, r.count])),
      blockedBy: row.blocked_by,
      ...(row.state_reason ? { stateReason: row.state_reason } : {}),
      created: row.created.toISOString(),
      updated: row.updated.toISOString(),
      workflowId: `task-graph/${row.task_graph_id}`,
    };
  },
});

/** What the last amend did to the task, and its early cutoff: decided, or what it waits for (docs/formats.md § Early cutoff). */
function amendOf(r: InspectRow) {
  if (!r.amended) return {};
  const cutoff = cutoffNote(r.cutoff);
  return { amended: AMENDED_CLASS[r.amended], ...(r.replaces ? { replaces: r.replaces } : {}), ...(cutoff ? { cutoff } : {}) };
}

const inspectTask = (r: InspectRow) => ({
  label: r.label,
  taskId: r.task_id,
  requires: r.requires,
  dependents: r.dependents,
  ...(r.dependent_count > r.dependents.length ? { dependentCount: r.dependent_count } : {}),
  reruns: r.reruns,
  rerunsLeft: r.reruns_left,
  state: r.state ?? 'missing',
  ...amendOf(r),
});

export const inspectEndpoint = declare({
  service: 'scheduler',
  name: 'inspect',
  title: 'Inspect Task-Graph',
  description:
    'Every task of the graph with label, taskId, requires, dependents, reruns left and queue state; paged by tasks ' +
    '(limit ≤ 10,000, continuationToken) and by edges: a page ends before the task that would take its requires and ' +
    'dependents past 10,000 (the first task always comes). A task lists at most 10,000 dependents; one with more ' +
    'also gives `dependentCount`.',
  method: 'get',
  route: '/task-graph/<taskGraphId>/inspect',
  concurrency: 'graphReads',
  scopes: GET_TASK_GRAPH,
  query: { limit: /^[1-9][0-9]{0,4}$/, continuationToken: /^[0-9]{1,9}$/ },
  async handler({ params, query, deps }) {
    const row = await mustGetGraph(deps.pool, params.taskGraphId);
    const limit = Math.min(Number(query.limit ?? 1000), 10_000);
    const after = query.continuationToken ? Number(query.continuationToken) : -1;
    const { rows: page, more } = await inspectNodes(deps.pool, params.taskGraphId, after, limit);
    return {
      status: graphStatus(row),
      tasks: page.map(inspectTask),
      ...(more ? { continuationToken: String(page[page.length - 1].idx) } : {}),
    };
  },
});

export const inspectTaskEndpoint = declare({
  service: 'scheduler',
  name: 'inspectTask',
  title: 'Inspect Task-Graph Task',
  description: 'One task of the graph, by taskId or label.',
  method: 'get',
  route: '/task-graph/<taskGraphId>/inspect/<taskIdOrLabel>',
  concurrency: 'graphReads',
  scopes: GET_TASK_GRAPH,
  async handler({ params, deps }) {
    await mustGetGraph(deps.pool, params.taskGraphId);
    const found = await inspectNode(deps.pool, params.taskGraphId, params.taskIdOrLabel);
    if (!found) throw new TgsError('ResourceNotFound', `no task ${params.taskIdOrLabel} in task-graph ${params.taskGraphId}`);
    return inspectTask(found);
  },
});
