import { declare } from '../../api/endpoint.js';
import { TgsError } from '../../errors.js';
import { getTaskQueue as getTaskQueueRow, listTaskQueues as listTaskQueueRows, pendingCount, splitTaskQueueId, type TaskQueueRow } from '../workers.js';
import { claimedCount, claimedTasksPage, pendingTasksPage } from '../taskQueueTasks.js';
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

export const taskQueueCounts = declare({
  service: 'queue',
  name: 'taskQueueCounts',
  title: 'Get Number of Pending and Claimed Tasks',
  description:
    'How many tasks of a task queue are pending (as `pendingTasks` counts them) and claimed (running, their claim ' +
    'not expired). Exact counts; an unknown queue has 0 of each.',
  method: 'get',
  route: '/task-queues/<taskQueueId>/counts',
  scopes: { AllOf: ['queue:pending-count:<taskQueueId>', 'queue:claimed-count:<taskQueueId>'] },
  output: {
    type: 'object',
    additionalProperties: false,
    required: ['provisionerId', 'workerType', 'taskQueueId', 'pendingTasks', 'claimedTasks'],
    properties: {
      provisionerId: { type: 'string' },
      workerType: { type: 'string' },
      taskQueueId: { type: 'string' },
      pendingTasks: { type: 'integer', minimum: 0 },
      claimedTasks: { type: 'integer', minimum: 0 },
    },
  },
  async handler({ params, deps }) {
    const { taskQueueId } = params;
    const [provisionerId, workerType] = splitTaskQueueId(taskQueueId);
    const [pendingTasks, claimedTasks] = await Promise.all([pendingCount(deps.pool, taskQueueId), claimedCount(deps.pool, taskQueueId)]);
    return { provisionerId, workerType, taskQueueId, pendingTasks, claimedTasks };
  },
});

const taskItem = (required: string[], properties: Record<string, unknown>) => ({
  type: 'object',
  additionalProperties: false,
  required: ['taskId', 'runId', 'task', ...required],
  properties: { taskId: { type: 'string' }, runId: { type: 'integer', minimum: 0 }, task: { type: 'object' }, ...properties },
});

export const listPendingTasks = declare({
  service: 'queue',
  name: 'listPendingTasks',
  title: 'List Pending Tasks',
  description:
    'The pending tasks of a task queue in the order claimWork takes them (highest priority first, then by when each ' +
    'became pending: `inserted`), each with its pending runId and definition; paged (limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/task-queues/<taskQueueId>/pending',
  query: PAGE_QUERY,
  scopes: 'queue:pending-list:<taskQueueId>',
  output: pagedListSchema('tasks', taskItem(['inserted'], { inserted: DATE_TIME })),
  async handler({ params, query, deps }) {
    const { page, next } = await readPage(query, (after, limit) => pendingTasksPage(deps.pool, params.taskQueueId, after, limit), (row) => row.key);
    return {
      tasks: page.map((row) => ({ taskId: row.task_id, runId: row.runs.length - 1, task: row.definition, inserted: row.pending_since.toISOString() })),
      ...next,
    };
  },
});

export const listClaimedTasks = declare({
  service: 'queue',
  name: 'listClaimedTasks',
  title: 'List claimed Tasks',
  description:
    'The claimed tasks of a task queue (running, their claim not expired), oldest claim or reclaim first, each with ' +
    'its runId, worker, `claimed` (when the claim was last taken or renewed) and definition; paged (limit ≤ 1000, ' +
    'continuationToken).',
  method: 'get',
  route: '/task-queues/<taskQueueId>/claimed',
  query: PAGE_QUERY,
  scopes: 'queue:claimed-list:<taskQueueId>',
  output: pagedListSchema('tasks', taskItem(['workerGroup', 'workerId', 'claimed'], { workerGroup: { type: 'string' }, workerId: { type: 'string' }, claimed: DATE_TIME })),
  async handler({ params, query, deps }) {
    const { page, next } = await readPage(query, (after, limit) => claimedTasksPage(deps.pool, params.taskQueueId, after, limit), (row) => row.key);
    const now = Date.now();
    return {
      tasks: page.map((row) => {
        const run = row.runs[row.runs.length - 1];
        // claimWork and reclaimTask set takenUntil to claimTimeout past the claim: the latest claim's time
        const renewed = (row.taken_until as Date).getTime() - deps.config.claimTimeoutSeconds * 1000;
        const claimed = Math.max(Date.parse(run.started ?? '') || 0, Math.min(now, renewed));
        return { taskId: row.task_id, runId: run.runId, workerGroup: run.workerGroup, workerId: run.workerId, claimed: new Date(claimed).toISOString(), task: row.definition };
      }),
      ...next,
    };
  },
});
