import { declare, type JsonSchema } from '../../api/endpoint.js';
import { TgsError } from '../../errors.js';
import { graphStatusSchema } from '../graphSchema.js';
import type { GraphRow } from '../graphStore.js';
import { graphStatus } from './shapes.js';

const GRAPH_STATES = ['running', 'blocked', 'finished', 'canceled'] as const;
const TASK_STATES = ['unscheduled', 'pending', 'running', 'completed', 'failed', 'exception'] as const;

/** `<created in µs since the epoch>.<taskGraphId>` of the last graph of a page, base64url. */
function encodeToken(createdUs: string, taskGraphId: string): string {
  return Buffer.from(`${createdUs}.${taskGraphId}`).toString('base64url');
}

function decodeToken(token: string): { createdUs: string; taskGraphId: string } {
  const m = /^(-?[0-9]{1,19})\.([A-Za-z0-9_-]{1,64})$/.exec(Buffer.from(token, 'base64url').toString('utf8'));
  if (!m) throw new TgsError('InputError', 'Invalid continuationToken: pass the continuationToken of the previous answer unchanged');
  return { createdUs: m[1], taskGraphId: m[2] };
}

const countsSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: [...TASK_STATES],
  properties: Object.fromEntries(TASK_STATES.map((s) => [s, { type: 'integer', minimum: 0 }])),
};

const listOutput: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['taskGraphs'],
  properties: {
    taskGraphs: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['status', 'name', 'origin', 'taskCount', 'counts', 'blockedBy', 'created', 'updated'],
        properties: {
          status: graphStatusSchema,
          name: { type: 'string', description: "the graph's metadata.name, or '' when it has none" },
          origin: { type: 'string', enum: ['graph', 'queue'] },
          taskCount: { type: 'integer', minimum: 0 },
          counts: countsSchema,
          blockedBy: { type: 'array', items: { type: 'string' } },
          created: { type: 'string', format: 'date-time' },
          updated: { type: 'string', format: 'date-time' },
        },
      },
    },
    continuationToken: { type: 'string' },
  },
};

export const listTaskGraphsEndpoint = declare({
  service: 'scheduler',
  name: 'listTaskGraphs',
  title: 'List Task-Graphs',
  description: [
    'Task-graphs, newest first, each with its status, name, task count, counts of its tasks by queue state,',
    'the tasks blocking it, and when it was created and last changed. `state` keeps only graphs in that state.',
    'Paged: `limit` (default 20, at most 1000) and the `continuationToken` of the previous answer.',
  ].join(' '),
  method: 'get',
  route: '/task-graphs',
  query: {
    state: new RegExp(`^(${GRAPH_STATES.join('|')})$`),
    continuationToken: /^[A-Za-z0-9_-]{1,200}$/,
    limit: /^[1-9][0-9]{0,3}$/,
  },
  output: listOutput,
  async handler({ query, deps }) {
    const limit = Math.min(Number(query.limit ?? 20), 1000);
    const after = query.continuationToken ? decodeToken(query.continuationToken) : undefined;
    const where: string[] = [];
    const args: unknown[] = [];
    if (query.state) {
      args.push(query.state);
      where.push(`state = $${args.length}`);
    }
    if (after) {
      args.push(after.createdUs, after.taskGraphId);
      const created = `(timestamptz 'epoch' + $${args.length - 1}::bigint * interval '1 microsecond')`;
      where.push(`(created < ${created} OR (created = ${created} AND task_graph_id > $${args.length}))`);
    }
    args.push(limit + 1);
    const { rows } = await deps.pool.query<GraphRow & { created_us: string }>(
      `SELECT *, (extract(epoch FROM created) * 1000000)::bigint::text AS created_us FROM task_graphs
       ${where.length ? `WHERE ${where.join(' AND ')}` : ''}
       ORDER BY created DESC, task_graph_id LIMIT $${args.length}`,
      args,
    );
    const page = rows.slice(0, limit);
    const counts = new Map(page.map((r) => [r.task_graph_id, Object.fromEntries(TASK_STATES.map((s) => [s, 0])) as Record<string, number>]));
    if (page.length) {
      const { rows: byState } = await deps.pool.query<{ task_graph_id: string; state: string; count: number }>(
        `SELECT n.task_graph_id, t.state, count(*) AS count
         FROM graph_nodes n JOIN tasks t ON t.task_id = n.task_id
         WHERE n.task_graph_id = ANY($1) AND n.member GROUP BY 1, 2`,
        [page.map((r) => r.task_graph_id)],
      );
      for (const r of byState) (counts.get(r.task_graph_id) as Record<string, number>)[r.state] = r.count;
    }
    const last = page[page.length - 1];
    return {
      taskGraphs: page.map((r) => ({
        status: graphStatus(r),
        name: typeof r.metadata?.name === 'string' ? r.metadata.name : '',
        origin: r.origin,
        taskCount: r.task_count,
        counts: counts.get(r.task_graph_id),
        blockedBy: r.blocked_by,
        created: r.created.toISOString(),
        updated: r.updated.toISOString(),
      })),
      ...(rows.length > limit ? { continuationToken: encodeToken(last.created_us, last.task_graph_id) } : {}),
    };
  },
});
