import type { JsonSchema } from '../../api/endpoint.js';

const run: JsonSchema = {
  type: 'object',
  required: ['runId', 'state', 'reasonCreated', 'scheduled'],
  properties: {
    runId: { type: 'integer' },
    state: { enum: ['pending', 'running', 'completed', 'failed', 'exception'] },
    reasonCreated: { enum: ['scheduled', 'retry', 'task-retry', 'rerun', 'exception'] },
    reasonResolved: { type: 'string' },
    workerGroup: { type: 'string' },
    workerId: { type: 'string' },
    takenUntil: { type: 'string', format: 'date-time' },
    scheduled: { type: 'string', format: 'date-time' },
    started: { type: 'string', format: 'date-time' },
    resolved: { type: 'string', format: 'date-time' },
    // tgs: a run resolved from the cache names the run it reuses (docs/formats.md § Cached tasks)
    cachedFrom: {
      type: 'object',
      required: ['taskId', 'runId', 'key', 'tier'],
      properties: { taskId: { type: 'string' }, runId: { type: 'integer' }, key: { type: 'string' }, tier: { type: 'string' } },
    },
    // tgs: a run an amend's early cutoff kept names the run of the task it replaces (docs/formats.md § Early cutoff)
    keptFrom: { type: 'object', required: ['taskId', 'runId'], properties: { taskId: { type: 'string' }, runId: { type: 'integer' } } },
  },
};

/** Taskcluster's task status structure. */
export const taskStatusSchema: JsonSchema = {
  type: 'object',
  required: ['taskId', 'provisionerId', 'workerType', 'taskQueueId', 'schedulerId', 'taskGroupId', 'deadline', 'expires', 'retriesLeft', 'state', 'runs'],
  properties: {
    taskId: { type: 'string' },
    state: { enum: ['unscheduled', 'pending', 'running', 'completed', 'failed', 'exception'] },
    retriesLeft: { type: 'integer', minimum: 0 },
    runs: { type: 'array', items: run },
  },
};

export const statusResponse: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['status'],
  properties: { status: taskStatusSchema },
};


export const DATE_TIME: JsonSchema = { type: 'string', format: 'date-time' };
export const STABILITY: JsonSchema = { enum: ['experimental', 'stable', 'deprecated'] };
