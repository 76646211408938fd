import type { JsonSchema } from '../../api/endpoint.js';
import { SLUGID_PATTERN } from '../../api/patterns.js';
import { pagedListSchema } from '../../api/paging.js';
import { MAX_NAMESPACE_LENGTH } from '../namespace.js';

/** Taskcluster's index schemas (indexed-task-response, insert-task-request, list-*-response). */

const dateTime: JsonSchema = { type: 'string', format: 'date-time' };
const namespace: JsonSchema = { type: 'string', maxLength: MAX_NAMESPACE_LENGTH };

export const indexedTaskSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['namespace', 'taskId', 'rank', 'data', 'expires'],
  properties: { namespace, taskId: { type: 'string', pattern: SLUGID_PATTERN }, rank: { type: 'number' }, data: { type: 'object' }, expires: dateTime },
};

export const insertTaskSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['taskId', 'rank', 'data', 'expires'],
  properties: { taskId: { type: 'string', pattern: SLUGID_PATTERN }, rank: { type: 'number' }, data: { type: 'object' }, expires: dateTime },
};

export const listTasksSchema = pagedListSchema('tasks', indexedTaskSchema);

export const listNamespacesSchema = pagedListSchema('namespaces', {
  type: 'object',
  additionalProperties: false,
  required: ['namespace', 'name', 'expires'],
  properties: { namespace, name: { type: 'string' }, expires: dateTime },
});

/** The most paths one findTasksAtIndex names (Taskcluster sets none; its body limit bounds it there). */
export const MAX_INDEX_PATHS = 10_000;

/** Taskcluster's list-tasks-at-index (`indexes`, default []), with a bound on the paths. */
export const listTasksAtIndexSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  properties: { indexes: { type: 'array', default: [], maxItems: MAX_INDEX_PATHS, items: namespace } },
};
