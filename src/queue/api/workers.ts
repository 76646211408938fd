import { declare } from '../../api/endpoint.js';
import { withTransaction } from '../../db/pool.js';
import { TgsError } from '../../errors.js';
import {
  declareWorker as declareWorkerRow,
  getTaskQueue,
  getWorker as getWorkerRow,
  listWorkers as listWorkerRows,
  quarantineWorker as quarantineWorkerRow,
  splitTaskQueueId,
  type WorkerRow,
} from '../workers.js';
import { PAGE_QUERY, pagedListSchema, readPage } from '../../api/paging.js';
import { DATE_TIME } from './schemas.js';

const recentTask = {
  type: 'object',
  additionalProperties: false,
  required: ['taskId', 'runId'],
  properties: { taskId: { type: 'string' }, runId: { type: 'integer' } },
};

/** Taskcluster's worker-response. */
const workerResponse = {
  type: 'object',
  additionalProperties: false,
  required: ['provisionerId', 'workerType', 'workerGroup', 'workerId', 'recentTasks', 'expires', 'firstClaim'],
  properties: {
    provisionerId: { type: 'string' },
    workerType: { type: 'string' },
    taskQueueId: { type: 'string' },
    workerGroup: { type: 'string' },
    workerId: { type: 'string' },
    recentTasks: { type: 'array', items: recentTask },
    expires: DATE_TIME,
    quarantineUntil: DATE_TIME,
    quarantineDetails: { type: 'array', items: { type: 'object' } },
    firstClaim: DATE_TIME,
    lastDateActive: DATE_TIME,
  },
};

const quarantined = (w: WorkerRow, now: number) => w.quarantine_until !== null && w.quarantine_until.getTime() > now;

function workerJson(w: WorkerRow) {
  const [provisionerId, workerType] = splitTaskQueueId(w.task_queue_id);
  return {
    provisionerId,
    workerType,
    taskQueueId: w.task_queue_id,
    workerGroup: w.worker_group,
    workerId: w.worker_id,
    recentTasks: w.recent_tasks,
    expires: w.expires.toISOString(),
    ...(w.quarantine_until ? { quarantineUntil: w.quarantine_until.toISOString() } : {}),
    quarantineDetails: w.quarantine_details,
    firstClaim: w.first_claim.toISOString(),
    lastDateActive: w.last_date_active.toISOString(),
  };
}

const notFound = (p: Record<string, string>) =>
  new TgsError(
    'ResourceNotFound',
    `Worker ${p.workerGroup}/${p.workerId} of worker type ${p.provisionerId}/${p.workerType} not found: it has not claimed work in the last day, nor been declared`,
  );

export const listWorkers = declare({
  service: 'queue',
  name: 'listWorkers',
  title: 'Get a list of all active workers of a workerType',
  description:
    'Workers that claimed from (or were declared in) the task queue in the last day, or are quarantined, in ' +
    '(workerGroup, workerId) order; each with its latest claimed run. `quarantined=true|false` filters. Paged ' +
    '(limit ≤ 1000, continuationToken). Claims are recorded within 2 s.',
  method: 'get',
  route: '/provisioners/<provisionerId>/worker-types/<workerType>/workers',
  query: { ...PAGE_QUERY, quarantined: /^(true|false)$/ },
  scopes: 'queue:list-workers:<provisionerId>/<workerType>',
  output: pagedListSchema('workers', {
    type: 'object',
    additionalProperties: false,
    required: ['workerGroup', 'workerId', 'firstClaim'],
    properties: {
      workerGroup: { type: 'string' },
      workerId: { type: 'string' },
      quarantineUntil: DATE_TIME,
      latestTask: recentTask,
      firstClaim: DATE_TIME,
      lastDateActive: DATE_TIME,
    },
  }),
  async handler({ params: p, query, deps }) {
    await deps.workers.flush();
    const { page, next } = await readPage(
      query,
      (after, limit) => {
        const [group = '', id = ''] = after === '' ? [] : after.split('/');
        return listWorkerRows(deps.pool, {
          taskQueueId: `${p.provisionerId}/${p.workerType}`,
          after: [group, id],
          limit,
          quarantined: query.quarantined === undefined ? undefined : query.quarantined === 'true',
        });
      },
      (w) => `${w.worker_group}/${w.worker_id}`,
    );
    const now = Date.now();
    return {
      workers: page.map((w) => ({
        workerGroup: w.worker_group,
        workerId: w.worker_id,
        firstClaim: w.first_claim.toISOString(),
        lastDateActive: w.last_date_active.toISOString(),
        ...(w.recent_tasks.length > 0 ? { latestTask: w.recent_tasks[w.recent_tasks.length - 1] } : {}),
        ...(quarantined(w, now) ? { quarantineUntil: (w.quarantine_until as Date).toISOString() } : {}),
      })),
      ...next,
    };
  },
});

export const getWorker = declare({
  service: 'queue',
  name: 'getWorker',
  title: 'Get a worker from worker-type',
  description: 'A worker: its latest 20 claimed runs (oldest first), first claim, last activity, expiry and quarantine.',
  method: 'get',
  route: '/provisioners/<provisionerId>/worker-types/<workerType>/workers/<workerGroup>/<workerId>',
  scopes: 'queue:get-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>',
  output: workerResponse,
  async handler({ params: p, deps }) {
    await deps.workers.flush();
    const taskQueueId = `${p.provisionerId}/${p.workerType}`;
    const [worker, queue] = await Promise.all([getWorkerRow(deps.pool, taskQueueId, p.workerGroup, p.workerId), getTaskQueue(deps.pool, taskQueueId)]);
    if (!worker || !queue) throw notFound(p);
    return workerJson(worker);
  },
});

export const quarantineWorker = declare<{ quarantineUntil: string; quarantineInfo?: string }>({
  service: 'queue',
  name: 'quarantineWorker',
  title: 'Quarantine a worker',
  description:
    'Until `quarantineUntil`, claimWork gives the worker no tasks (it waits out its long-poll and answers with ' +
    'none). A time in the past lifts the quarantine. Every call is added to `quarantineDetails` with the caller ' +
    'and `quarantineInfo`.',
  method: 'put',
  route: '/provisioners/<provisionerId>/worker-types/<workerType>/workers/<workerGroup>/<workerId>',
  scopes: { AllOf: ['queue:quarantine-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>'] },
  input: {
    type: 'object',
    additionalProperties: false,
    required: ['quarantineUntil'],
    properties: { quarantineUntil: DATE_TIME, quarantineInfo: { type: 'string', maxLength: 4000 } },
  },
  output: workerResponse,
  async handler({ params: p, body, deps, auth }) {
    await deps.workers.flush();
    const details = {
      clientId: auth.clientId ?? '',
      updatedAt: new Date().toISOString(),
      quarantineUntil: new Date(body.quarantineUntil).toISOString(),
      quarantineInfo: body.quarantineInfo || '[unspecified]',
    };
    const worker = await quarantineWorkerRow(deps.pool, `${p.provisionerId}/${p.workerType}`, p.workerGroup, p.workerId, details.quarantineUntil, details);
    if (!worker) throw notFound(p);
    return workerJson(worker);
  },
});

export const declareWorker = declare<{ expires: string }>({
  service: 'queue',
  name: 'declareWorker',
  title: 'Declare a worker',
  description:
    'Create a worker (and its task queue) or set its expiry; each property given needs ' +
    '`queue:declare-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>#<property>`.',
  method: 'put',
  route: '/provisioners/<provisionerId>/worker-types/<workerType>/<workerGroup>/<workerId>',
  scopes: { AllOf: [{ for: 'property', in: 'properties', each: 'queue:declare-worker:<provisionerId>/<workerType>/<workerGroup>/<workerId>#<property>' }] },
  input: { type: 'object', additionalProperties: false, required: ['expires'], properties: { expires: DATE_TIME } },
  output: workerResponse,
  async handler({ params: p, body, deps, authorize }) {
    authorize({ properties: Object.keys(body) });
    const taskQueueId = `${p.provisionerId}/${p.workerType}`;
    const worker = await withTransaction(deps.pool, (client) => declareWorkerRow(client, taskQueueId, p.workerGroup, p.workerId, body.expires));
    return workerJson(worker);
  },
});
