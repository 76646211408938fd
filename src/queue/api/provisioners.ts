import { declare } from '../../api/endpoint.js';
import { withTransaction } from '../../db/pool.js';
import { TgsError } from '../../errors.js';
import {
  declareProvisioner as declareProvisionerRow,
  declareTaskQueue,
  getProvisioner as getProvisionerRow,
  getTaskQueue,
  listProvisioners as listProvisionerRows,
  listTaskQueues,
  type ProvisionerRow,
  type TaskQueueRow,
} from '../workers.js';
import { PAGE_QUERY, pagedListSchema, readPage } from '../../api/paging.js';
import { DATE_TIME, STABILITY } from './schemas.js';
import { taskQueueJson } from './taskQueues.js';

/**
 * Provisioners and worker types: the names old clients use for task queues (`<provisionerId>/<workerType>`).
 * Kept for them; a worker type is a task queue, a provisioner the first half of task queue ids.
 */

const action = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'title', 'context', 'url', 'method', 'description'],
  properties: {
    name: { type: 'string', maxLength: 1024 },
    title: { type: 'string', maxLength: 1024 },
    context: { enum: ['provisioner', 'worker-type', 'worker'] },
    url: { type: 'string', maxLength: 4096 },
    method: { enum: ['POST', 'PUT', 'DELETE', 'PATCH'] },
    description: { type: 'string', maxLength: 10240 },
  },
};

const provisionerResponse = {
  type: 'object',
  additionalProperties: false,
  required: ['provisionerId', 'description', 'stability', 'expires', 'lastDateActive'],
  properties: {
    provisionerId: { type: 'string' },
    description: { type: 'string' },
    stability: STABILITY,
    expires: DATE_TIME,
    lastDateActive: DATE_TIME,
    actions: { type: 'array', items: action },
  },
};

const workerTypeResponse = {
  type: 'object',
  additionalProperties: false,
  required: ['workerType', 'provisionerId', 'taskQueueId', 'description', 'stability', 'expires', 'lastDateActive'],
  properties: {
    provisionerId: { type: 'string' },
    workerType: { type: 'string' },
    taskQueueId: { type: 'string' },
    description: { type: 'string' },
    stability: STABILITY,
    expires: DATE_TIME,
    lastDateActive: DATE_TIME,
  },
};

const provisionerJson = (p: ProvisionerRow) => ({
  provisionerId: p.provisioner_id,
  description: p.description,
  stability: p.stability,
  expires: p.expires.toISOString(),
  lastDateActive: p.last_date_active.toISOString(),
  actions: p.actions,
});

const workerTypeJson = (q: TaskQueueRow) => ({ provisionerId: q.provisioner_id, workerType: q.worker_type, ...taskQueueJson(q) });

export const listProvisioners = declare({
  service: 'queue',
  name: 'listProvisioners',
  title: 'Get a list of all active provisioners',
  description: 'Provisioners active (or declared) in the last 5 days, in provisionerId order, paged (limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/provisioners',
  query: PAGE_QUERY,
  scopes: 'queue:list-provisioners',
  output: pagedListSchema('provisioners', provisionerResponse),
  async handler({ query, deps }) {
    await deps.workers.flush();
    const { page, next } = await readPage(query, (after, limit) => listProvisionerRows(deps.pool, { after, limit }), (p) => p.provisioner_id);
    return { provisioners: page.map(provisionerJson), ...next };
  },
});

export const getProvisioner = declare({
  service: 'queue',
  name: 'getProvisioner',
  title: 'Get an active provisioner',
  description: 'A provisioner active (or declared) in the last 5 days.',
  method: 'get',
  route: '/provisioners/<provisionerId>',
  scopes: 'queue:get-provisioner:<provisionerId>',
  output: provisionerResponse,
  async handler({ params, deps }) {
    await deps.workers.flush();
    const found = await getProvisionerRow(deps.pool, params.provisionerId);
    if (!found) throw new TgsError('ResourceNotFound', `Provisioner ${params.provisionerId} not found`);
    return provisionerJson(found);
  },
});

/**
 * The properties a declare call must hold a scope for: those given, or `*` (all of them) for an empty body.
 * Taskcluster asks one scope per property given, so `{}` needed none and anyone could create rows and renew
 * their activity; here every declare needs a scope.
 */
function declaredProperties(body: object): string[] {
  const given = Object.keys(body);
  return given.length > 0 ? given : ['*'];
}

type ProvisionerRequest = { description?: string; stability?: string; expires?: string; actions?: unknown[] };

export const declareProvisioner = declare<ProvisionerRequest>({
  service: 'queue',
  name: 'declareProvisioner',
  title: 'Update a provisioner',
  description:
    'Create a provisioner or set some of its properties; each property given needs ' +
    '`queue:declare-provisioner:<provisionerId>#<property>`, and an empty body (which creates the provisioner or ' +
    'renews its activity) needs `queue:declare-provisioner:<provisionerId>#*`.',
  method: 'put',
  route: '/provisioners/<provisionerId>',
  scopes: { AllOf: [{ for: 'property', in: 'properties', each: 'queue:declare-provisioner:<provisionerId>#<property>' }] },
  input: {
    type: 'object',
    additionalProperties: false,
    properties: { stability: STABILITY, description: { type: 'string', maxLength: 10240 }, expires: DATE_TIME, actions: { type: 'array', items: action, maxItems: 100 } },
  },
  output: provisionerResponse,
  async handler({ params, body, deps, authorize }) {
    authorize({ properties: declaredProperties(body) });
    return provisionerJson(await declareProvisionerRow(deps.pool, params.provisionerId, body));
  },
});

export const listWorkerTypes = declare({
  service: 'queue',
  name: 'listWorkerTypes',
  title: 'Get a list of all active worker-types',
  description: 'The worker types (task queues) of a provisioner active in the last 5 days, paged (limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/provisioners/<provisionerId>/worker-types',
  query: PAGE_QUERY,
  scopes: 'queue:list-worker-types:<provisionerId>',
  output: pagedListSchema('workerTypes', workerTypeResponse),
  async handler({ params, query, deps }) {
    await deps.workers.flush();
    const { page, next } = await readPage(query, (after, limit) => listTaskQueues(deps.pool, { provisionerId: params.provisionerId, after, limit }), (q) => q.task_queue_id);
    return { workerTypes: page.map(workerTypeJson), ...next };
  },
});

export const getWorkerType = declare({
  service: 'queue',
  name: 'getWorkerType',
  title: 'Get a worker-type',
  description: 'A worker type: the task queue `<provisionerId>/<workerType>`.',
  method: 'get',
  route: '/provisioners/<provisionerId>/worker-types/<workerType>',
  scopes: 'queue:get-worker-type:<provisionerId>/<workerType>',
  output: workerTypeResponse,
  async handler({ params, deps }) {
    await deps.workers.flush();
    const found = await getTaskQueue(deps.pool, `${params.provisionerId}/${params.workerType}`);
    if (!found) throw new TgsError('ResourceNotFound', `Worker type ${params.provisionerId}/${params.workerType} not found`);
    return workerTypeJson(found);
  },
});

type WorkerTypeRequest = { description?: string; stability?: string; expires?: string };

export const declareWorkerType = declare<WorkerTypeRequest>({
  service: 'queue',
  name: 'declareWorkerType',
  title: 'Update a worker-type',
  description:
    'Create a worker type (task queue) or set some of its properties; each property given needs ' +
    '`queue:declare-worker-type:<provisionerId>/<workerType>#<property>`, and an empty body (which creates the ' +
    'worker type or renews its activity) needs `queue:declare-worker-type:<provisionerId>/<workerType>#*`.',
  method: 'put',
  route: '/provisioners/<provisionerId>/worker-types/<workerType>',
  scopes: { AllOf: [{ for: 'property', in: 'properties', each: 'queue:declare-worker-type:<provisionerId>/<workerType>#<property>' }] },
  input: {
    type: 'object',
    additionalProperties: false,
    properties: { stability: STABILITY, description: { type: 'string', maxLength: 10240 }, expires: DATE_TIME },
  },
  output: workerTypeResponse,
  async handler({ params, body, deps, authorize }) {
    authorize({ properties: declaredProperties(body) });
    const taskQueueId = `${params.provisionerId}/${params.workerType}`;
    const row = await withTransaction(deps.pool, async (client) => {
      await declareProvisionerRow(client, params.provisionerId, {});
      return declareTaskQueue(client, taskQueueId, body);
    });
    return workerTypeJson(row);
  },
});
