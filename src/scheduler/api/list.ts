import { declare, type JsonSchema } from '../../api/endpoint.js';
import { PAGE_QUERY, pageResult } from '../../api/paging.js';
import { TgsError } from '../../errors.js';
import { graphStatusSchema } from '../graphSchema.js';
import { listGraphs, memberStateCounts, type GraphListPosition } from '../graphReads.js';
import { graphStatus } from './shapes.js';

const GRAPH_STATES = ['running', 'blocked', 'finished', 'canceled', 'terminated'] as const;
const TASK_STATES = ['unscheduled', 'pending', 'running', 'completed', 'failed', 'exception'] as const;

/**
 * Its continuation token is `<created in µs since the epoch>.<taskGraphId>` of the last graph of a page, base64url
 * (src/api/paging.ts encodes it); its default page is 20 graphs, and it reads the token with its own rules.
 */
function decodeToken(token: string): GraphListPosition {
  // at most 17 digits: ±10^17 µs (years 1200 BC to 5138) stays inside Postgres' bigint and timestamptz ranges,
  // where 19 digits were a 500
  const m = /^(-?[0-9]{1,17})\.([A-Za-z0-9_-]{1,64})$/.exec(Buffer.from(token, 'base64url').toString('utf8'));
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
        required: ['status', 'name', 'owner', 'submittedBy', 'origin', 'taskCount', 'counts', 'blockedBy', 'created', 'updated'],
        properties: {
          status: graphStatusSchema,
          name: { type: 'string', description: "the graph's metadata.name, or '' when it has none" },
          owner: { type: 'string', description: "the graph's metadata.owner, or '' when it has none" },
          submittedBy: { type: 'string', description: "the clientId that submitted the graph (`hook-id:…` for a hook's fire), or '' when unknown" },
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
    'Task-graphs, newest first, each with its status, name, owner, task count, counts of its tasks by queue state,',
    'the tasks blocking it, and when it was created and last changed. `state` keeps only graphs in that state.',
    'Paged: `limit` (default 20, at most 1000) and the `continuationToken` of the previous answer.',
  ].join(' '),
  method: 'get',
  route: '/task-graphs',
  concurrency: 'graphReads',
  scopes: 'scheduler:list-task-graphs',
  query: {
    state: new RegExp(`^(${GRAPH_STATES.join('|')})$`),
    ...PAGE_QUERY,
  },
  output: listOutput,
  async handler({ query, deps }) {
    const limit = Math.min(Number(query.limit ?? 20), 1000);
    const after = query.continuationToken ? decodeToken(query.continuationToken) : undefined;
    const rows = await listGraphs(deps.pool, { state: query.state, after, limit: limit + 1 });
    const { page, continuationToken } = pageResult(rows, limit, (r) => `${r.created_us}.${r.task_graph_id}`);
    const counts = new Map(page.map((r) => [r.task_graph_id, Object.fromEntries(TASK_STATES.map((s) => [s, 0])) as Record<string, number>]));
    if (page.length) {
      for (const r of await memberStateCounts(deps.pool, page.map((r) => r.task_graph_id))) (counts.get(r.task_graph_id) as Record<string, number>)[r.state] = r.count;
    }
    return {
      taskGraphs: page.map((r) => ({
        status: graphStatus(r),
        name: typeof r.metadata?.name === 'string' ? r.metadata.name : '',
        owner: typeof r.metadata?.owner === 'string' ? r.metadata.owner : '',
        submittedBy: r.submitted_by ?? '',
        origin: r.origin,
        taskCount: r.task_count,
        counts: counts.get(r.task_graph_id),
        blockedBy: r.blocked_by,
        created: r.created.toISOString(),
        updated: r.updated.toISOString(),
      })),
      ...(continuationToken === undefined ? {} : { continuationToken }),
    };
  },
});
