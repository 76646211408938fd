import { declare, type EndpointContext } from '../../api/endpoint.js';
import { TASK_IDS_BODY_LIMIT } from '../../api/bodyLimits.js';
import { PAGE_QUERY, readPage } from '../../api/paging.js';
import { batchTaskIds, loadTaskBatch, MAX_BATCH_TASK_IDS } from '../taskBatch.js';
import { taskStatus } from '../taskRow.js';
import { taskStatusSchema } from './schemas.js';

/** Taskcluster's tasks-request: the taskIds to read (duplicates allowed; none is an empty answer). */
const tasksRequest = {
  type: 'object',
  additionalProperties: false,
  properties: { taskIds: { type: 'array', default: [], maxItems: MAX_BATCH_TASK_IDS, items: { type: 'string' } } },
};

const PAGING =
  'Unknown taskIds are left out (callers compare). Paged in taskId order: up to `limit` (≤ 1000) tasks a page, and a ' +
  '`continuationToken` while more may follow; send the same taskIds with it. Scopes for every taskId named, whichever ' +
  `page; at most ${MAX_BATCH_TASK_IDS.toLocaleString('en-US')} taskIds a call (Taskcluster sets no number).`;

/** Checks the scopes for every taskId named (once each), then reads one page of those that exist. */
async function batchPage<T extends { task_id: string }>(
  { body, query, authorize }: EndpointContext<{ taskIds: string[] }>,
  load: (taskIds: string[], limit: number) => Promise<T[]>,
) {
  const taskIds = [...new Set(body.taskIds)];
  authorize({ taskIds });
  return readPage(query, (after, limit) => load(batchTaskIds(taskIds, after), limit), (row) => row.task_id);
}

export const tasks = declare<{ taskIds: string[] }>({
  service: 'queue',
  name: 'tasks',
  title: 'Get multiple task definitions',
  description: `The definition of each task named (as \`task\` answers it). ${PAGING}`,
  method: 'post',
  route: '/tasks',
  query: PAGE_QUERY,
  scopes: { AllOf: [{ for: 'taskId', in: 'taskIds', each: 'queue:get-task:<taskId>' }] },
  input: tasksRequest,
  output: {
    type: 'object',
    additionalProperties: false,
    required: ['tasks'],
    properties: {
      tasks: {
        type: 'array',
        items: { type: 'object', additionalProperties: false, required: ['taskId', 'task'], properties: { taskId: { type: 'string' }, task: { type: 'object' } } },
      },
      continuationToken: { type: 'string' },
    },
  },
  bodyLimit: TASK_IDS_BODY_LIMIT,
  async handler(ctx) {
    const { page, next } = await batchPage(ctx, (ids, limit) => loadTaskBatch(ctx.deps.pool, ids, limit, 'definition'));
    return { tasks: page.map((row) => ({ taskId: row.task_id, task: row.definition })), ...next };
  },
});

export const statuses = declare<{ taskIds: string[] }>({
  service: 'queue',
  name: 'statuses',
  title: 'Get multiple task statuses',
  description: `The status of each task named (as \`status\` answers it). ${PAGING}`,
  method: 'post',
  route: '/tasks/status',
  query: PAGE_QUERY,
  scopes: { AllOf: [{ for: 'taskId', in: 'taskIds', each: 'queue:status:<taskId>' }] },
  input: tasksRequest,
  output: {
    type: 'object',
    additionalProperties: false,
    required: ['statuses'],
    properties: {
      statuses: {
        type: 'array',
        items: { type: 'object', additionalProperties: false, required: ['taskId', 'status'], properties: { taskId: { type: 'string' }, status: taskStatusSchema } },
      },
      continuationToken: { type: 'string' },
    },
  },
  bodyLimit: TASK_IDS_BODY_LIMIT,
  async handler(ctx) {
    const { page, next } = await batchPage(ctx, (ids, limit) => loadTaskBatch(ctx.deps.pool, ids, limit, 'status'));
    return { statuses: page.map((row) => ({ taskId: row.task_id, status: taskStatus(row) })), ...next };
  },
});
