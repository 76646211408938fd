import { declare } from '../../api/endpoint.js';
import { TgsError } from '../../errors.js';
import { getTaskQueue as getTaskQueueRow, listTaskQueues as listTaskQueueRows, pendingCount, type TaskQueueRow } from '../workers.js';
import { PAGE_QUERY, pagedListSchema, readPage } from '../../api/paging.js';
import { DATE_TIME, STABILITY } from './schemas.js';


/** Taskcluster's taskqueue-response. */
export const taskQueueResponse = {
  type: 'object',
  additionalProperties: false,
  required: ['taskQueueId', 'description', 'stability', 'expires', 'lastDateActive'],
  properties: {
    taskQueueId: { type: 'string' },
    description: { type: 'string' },
    stability: STABILITY,
    expires: DATE_TIME,
    lastDateActive: DATE_TIME,
    pendingTasks: { type: 'integer', minimum: 0 },
  },
};

export const taskQueueJson = (q: TaskQueueRow) => ({
  taskQueueId: q.task_queue_id,
  description: q.description,
  stability: q.stability,
  expires: q.expires.toISOString(),
  lastDateActive: q.last_date_active.toISOString(),
});

export const listTaskQueues = declare({
  service: 'queue',
  name: 'listTaskQueues',
  title: 'Get a list of all active task queues',
  description:
    'Task queues that were active (a task created, a worker claiming) in the last 5 days, or declared, in ' +
    'taskQueueId order, paged (limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/task-queues',
  query: PAGE_QUERY,
  scopes: 'queue:list-task-queues',
  output: pagedListSchema('taskQueues', taskQueueResponse),
  async handler({ query, deps }) {
    await deps.workers.flush();
    const { page, next } = await readPage(query, (after, limit) => listTaskQueueRows(deps.pool, { after, limit }), (q) => q.task_queue_id);
    return { taskQueues: page.map(taskQueueJson), ...next };
  },
});

export const getTaskQueue = declare({
  service: 'queue',
  name: 'getTaskQueue',
  title: 'Get a task queue',
  description:
    'A task queue: description, stability, expires, lastDateActive (when a worker last claimed from it or a task ' +
    'was created in it; recorded within 2 s), and — beyond Taskcluster\'s fields — `pendingTasks`, its pending count.',
  method: 'get',
  route: '/task-queues/<taskQueueId>',
  scopes: 'queue:get-task-queue:<taskQueueId>',
  output: taskQueueResponse,
  async handler({ params, deps }) {
    await deps.workers.flush();
    const queue = await getTaskQueueRow(deps.pool, params.taskQueueId);
    if (!queue) throw new TgsError('ResourceNotFound', `Task queue ${params.taskQueueId} not found: no task or worker used it in the last 5 days`);
    return { ...taskQueueJson(queue), pendingTasks: await pendingCount(deps.pool, params.taskQueueId) };
  },
});
