import type { JsonSchema } from '../../api/endpoint.js';
import { HOOK_GROUP_ID, HOOK_ID, SLUGID_PATTERN } from '../../api/patterns.js';

/** Taskcluster's hooks schemas (v1), as the official client and its users expect them. */

const hookMetadata: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'description', 'owner'],
  properties: {
    name: { type: 'string', maxLength: 255 },
    description: { type: 'string', maxLength: 32768 },
    owner: { type: 'string', maxLength: 255, format: 'email' },
    emailOnError: { type: 'boolean', default: true },
  },
};

const bindings: JsonSchema = {
  type: 'array',
  uniqueItems: true,
  maxItems: 100,
  items: {
    type: 'object',
    additionalProperties: false,
    required: ['exchange', 'routingKeyPattern'],
    properties: { exchange: { type: 'string', minLength: 1, maxLength: 255 }, routingKeyPattern: { type: 'string', minLength: 1, maxLength: 255 } },
  },
};

/** Cron patterns; the count and length are tgs's bounds (Temporal keeps each in the schedule's spec). */
const schedule: JsonSchema = { type: 'array', uniqueItems: true, maxItems: 100, items: { type: 'string', minLength: 1, maxLength: 256 } };

export const createHookRequest: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['metadata', 'task'],
  properties: {
    hookGroupId: { type: 'string', pattern: HOOK_GROUP_ID.source },
    hookId: { type: 'string', pattern: HOOK_ID.source },
    metadata: hookMetadata,
    bindings,
    schedule: { ...schedule, default: [] },
    task: { type: 'object' },
    triggerSchema: { type: 'object', default: { type: 'object', additionalProperties: false } },
  },
};

export const hookDefinition: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['hookGroupId', 'hookId', 'metadata', 'task', 'schedule', 'triggerSchema'],
  properties: {
    hookGroupId: { type: 'string' },
    hookId: { type: 'string' },
    metadata: hookMetadata,
    bindings,
    schedule,
    task: { type: 'object' },
    triggerSchema: { type: 'object' },
  },
};

export const listHookGroupsResponse: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['groups'],
  properties: { groups: { type: 'array', items: { type: 'string' } } },
};

export const listHooksResponse: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['hooks'],
  properties: { hooks: { type: 'array', items: hookDefinition } },
};

export const hookStatus: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['lastFire'],
  properties: {
    lastFire: {
      oneOf: [
        {
          type: 'object',
          additionalProperties: false,
          required: ['result', 'taskId', 'time'],
          properties: { result: { const: 'success' }, taskId: { type: 'string', pattern: SLUGID_PATTERN }, time: { type: 'string', format: 'date-time' } },
        },
        {
          type: 'object',
          additionalProperties: false,
          required: ['result', 'error', 'time'],
          properties: { result: { const: 'error' }, error: { type: 'object' }, time: { type: 'string', format: 'date-time' } },
        },
        { type: 'object', additionalProperties: false, required: ['result'], properties: { result: { const: 'no-fire' } } },
      ],
    },
    nextScheduledDate: { type: 'string', format: 'date-time' },
  },
};

export const triggerHookRequest: JsonSchema = { type: 'object' };

export const triggerHookResponse: JsonSchema = {
  anyOf: [
    {
      type: 'object',
      additionalProperties: false,
      required: ['taskId'],
      properties: {
        taskId: { type: 'string', pattern: SLUGID_PATTERN },
        status: { type: 'object', additionalProperties: false, properties: { taskId: { type: 'string', pattern: SLUGID_PATTERN } } },
      },
    },
    { type: 'object', additionalProperties: false, properties: {} },
  ],
};

export const triggerTokenResponse: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['token'],
  properties: { token: { type: 'string' } },
};

export const listLastFiresResponse: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['lastFires'],
  properties: {
    lastFires: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['hookGroupId', 'hookId', 'taskId', 'firedBy', 'taskCreateTime', 'result', 'taskState', 'error'],
        properties: {
          hookGroupId: { type: 'string' },
          hookId: { type: 'string' },
          firedBy: { enum: ['schedule', 'triggerHook', 'triggerHookWithToken', 'pulseMessage'] },
          taskId: { type: 'string', pattern: SLUGID_PATTERN },
          taskCreateTime: { type: 'string', format: 'date-time' },
          result: { enum: ['success', 'error'] },
          taskState: { enum: ['unknown', 'unscheduled', 'pending', 'running', 'completed', 'failed', 'exception'] },
          error: { type: 'string' },
        },
      },
    },
    continuationToken: { type: 'string' },
  },
};
