import { declare } from '../../api/endpoint.js';
import { SLUGID } from '../../api/patterns.js';
import { TgsError } from '../../errors.js';
import { requireGraph as mustGetGraph } from '../graphStore.js';
import { graphStatus, statusResponseSchema } from './shapes.js';

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
  description: "Seed 000's task-graph status structure `{schedulerId, taskGraphId, state, routing}`.",
  method: 'get',
  route: '/task-graph/<taskGraphId>/status',
  params: { taskGraphId: SLUGID },
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
  params: { taskGraphId: SLUGID },
  async handler({ params, deps }) {
    const row = await mustGetGraph(deps.pool, params.taskGraphId);
    const { rows } = await deps.pool.query<{ state: string; count: number }>(
      `SELECT t.state, count(*) AS count FROM graph_nodes n JOIN tasks t ON t.task_id = n.task_id
       WHERE n.task_graph_id = $1 AND n.member GROUP BY t.state`,
      [params.taskGraphId],
    );
    return {
      status: graphStatus(row),
      origin: row.origin,
      metadata: row.metadata,
      tags: row.tags,
      scopes: row.scopes,
      taskCount: row.task_count,
      counts: Object.fromEntries(rows.map((r) => [r.state, r.count])),
      blockedBy: row.blocked_by,
      created: row.created.toISOString(),
      updated: row.updated.toISOString(),
      workflowId: `task-graph/${row.task_graph_id}`,
    };
  },
});

interface InspectRow {
  idx: number;
  label: string;
  task_id: string;
  reruns: number;
  reruns_left: number;
  state: string | null;
  requires: string[];
  dependents: string[];
}

const INSPECT_SQL = `
  SELECT n.idx, n.label, n.task_id, n.reruns, n.reruns_left, t.state,
         ARRAY(SELECT coalesce(r.label, r.task_id) FROM graph_nodes r
               WHERE r.task_graph_id = n.task_graph_id AND r.idx = ANY(n.requires) ORDER BY r.idx) AS requires,
         ARRAY(SELECT coalesce(d.label, d.task_id) FROM task_dependencies td
               JOIN graph_nodes d ON d.task_graph_id = n.task_graph_id AND d.task_id = td.dependent_task_id
               WHERE td.required_task_id = n.task_id ORDER BY d.idx) AS dependents
  FROM graph_nodes n LEFT JOIN tasks t ON t.task_id = n.task_id
  WHERE n.task_graph_id = $1 AND n.member`;

const inspectTask = (r: InspectRow) => ({
  label: r.label,
  taskId: r.task_id,
  requires: r.requires,
  dependents: r.dependents,
  reruns: r.reruns,
  rerunsLeft: r.reruns_left,
  state: r.state ?? 'missing',
});

export const inspectEndpoint = declare({
  service: 'scheduler',
  name: 'inspect',
  title: 'Inspect Task-Graph',
  description: 'Every task of the graph with label, taskId, requires, dependents, reruns left and queue state; paged (limit ≤ 10,000, continuationToken).',
  method: 'get',
  route: '/task-graph/<taskGraphId>/inspect',
  params: { taskGraphId: SLUGID },
  query: { limit: /^[1-9][0-9]{0,4}$/, continuationToken: /^[0-9]{1,9}$/ },
  async handler({ params, query, deps }) {
    const row = await mustGetGraph(deps.pool, params.taskGraphId);
    const limit = Math.min(Number(query.limit ?? 1000), 10_000);
    const after = query.continuationToken ? Number(query.continuationToken) : -1;
    const { rows } = await deps.pool.query<InspectRow>(`${INSPECT_SQL} AND n.idx > $2 ORDER BY n.idx LIMIT $3`, [
      params.taskGraphId,
      after,
      limit + 1,
    ]);
    const more = rows.length > limit;
    const page = rows.slice(0, limit);
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
  params: { taskGraphId: SLUGID },
  async handler({ params, deps }) {
    await mustGetGraph(deps.pool, params.taskGraphId);
    const { rows } = await deps.pool.query<InspectRow>(`${INSPECT_SQL} AND (n.task_id = $2 OR n.label = $2) LIMIT 1`, [
      params.taskGraphId,
      params.taskIdOrLabel,
    ]);
    if (!rows[0]) throw new TgsError('ResourceNotFound', `no task ${params.taskIdOrLabel} in task-graph ${params.taskGraphId}`);
    return inspectTask(rows[0]);
  },
});
