import { compile, describeErrors } from '../api/validate.js';
import { SLUGID_PATTERN } from '../api/patterns.js';
import { isValidScope } from '../auth/scopes.js';
import type { JsonSchema } from '../api/endpoint.js';

const identifier = { type: 'string', minLength: 1, maxLength: 22, pattern: '^([a-zA-Z0-9-_]*)$' };

/** Taskcluster's task definition, plus an optional `routing` filled by the graph scheduler (docs/formats.md § Task definition). */
export const taskDefinitionSchema: JsonSchema = {
  $id: 'tgs:task-definition',
  type: 'object',
  additionalProperties: false,
  required: ['provisionerId', 'workerType', 'created', 'deadline', 'payload', 'metadata'],
  properties: {
    provisionerId: identifier,
    workerType: identifier,
    schedulerId: { ...identifier, default: '-' },
    projectId: { ...identifier, default: 'none' },
    taskGroupId: { type: 'string', pattern: SLUGID_PATTERN },
    dependencies: { type: 'array', maxItems: 10_000, uniqueItems: true, items: { type: 'string', pattern: SLUGID_PATTERN }, default: [] },
    requires: { enum: ['all-completed', 'all-resolved'], default: 'all-completed' },
    routes: { type: 'array', maxItems: 64, uniqueItems: true, items: { type: 'string', minLength: 1, maxLength: 249 }, default: [] },
    priority: { enum: ['highest', 'very-high', 'high', 'medium', 'low', 'very-low', 'lowest', 'normal'], default: 'lowest' },
    retries: { type: 'integer', minimum: 0, maximum: 49, default: 5 },
    created: { type: 'string', format: 'date-time' },
    deadline: { type: 'string', format: 'date-time' },
    expires: { type: 'string', format: 'date-time' },
    scopes: { type: 'array', uniqueItems: true, items: { type: 'string', pattern: '^[\\x20-\\x7e]*$' }, default: [] },
    payload: { type: 'object' },
    metadata: {
      type: 'object',
      additionalProperties: false,
      required: ['name', 'description', 'owner', 'source'],
      properties: {
        name: { type: 'string', maxLength: 255 },
        description: { type: 'string', maxLength: 32768 },
        owner: { type: 'string', maxLength: 255 },
        source: { type: 'string', maxLength: 4096, pattern: '^https?://' },
      },
    },
    tags: { type: 'object', additionalProperties: { type: 'string', maxLength: 4096 }, default: {} },
    extra: { type: 'object', default: {} },
    // docs/formats.md: `<graph.routing>.<task.routing>` for graph tasks; words may contain dots
    routing: { type: 'string', maxLength: 64, pattern: '^[A-Za-z0-9_.-]*$' },
  },
};

export interface TaskDefinition {
  provisionerId: string;
  workerType: string;
  schedulerId: string;
  projectId: string;
  taskGroupId: string;
  dependencies: string[];
  requires: 'all-completed' | 'all-resolved';
  routes: string[];
  priority: string;
  retries: number;
  created: string;
  deadline: string;
  expires: string;
  scopes: string[];
  payload: Record<string, unknown>;
  metadata: { name: string; description: string; owner: string; source: string };
  tags: Record<string, string>;
  extra: Record<string, unknown>;
  routing?: string;
}

const FIFTEEN_MINUTES = 15 * 60 * 1000;
const FIVE_DAYS = 5 * 24 * 60 * 60 * 1000;
const ONE_YEAR = 365 * 24 * 60 * 60 * 1000;

/**
 * A date of a definition as read (ms since the epoch, NaN when Date cannot read it) and as stored (ISO), by its
 * text: a graph's tasks mostly share their created, deadline and expires, and parsing and formatting them for
 * each task again took 1.4 µs of the 19.3 µs a graph's node cost to prepare (medians, docs/bench-journal/2026-11-27.md).
 * Bounded: cleared when full.
 */
const dates = new Map<string, { ms: number; iso: string | undefined }>();
function readDate(text: string): { ms: number; iso: string | undefined } {
  let date = dates.get(text);
  if (!date) {
    const ms = Date.parse(text);
    date = { ms, iso: Number.isNaN(ms) ? undefined : new Date(ms).toISOString() };
    if (dates.size >= 1_000) dates.clear();
    dates.set(text, date);
  }
  return date;
}

/**
 * Validates and normalizes a task definition (defaults filled in, dates as ISO strings). Never throws:
 * the graph scheduler collects errors per label.
 */
export function validateTaskDefinition(input: unknown, taskId: string, now: Date): { definition: TaskDefinition } | { errors: string[] } {
  if (typeof input !== 'object' || input === null || Array.isArray(input)) return { errors: ['the task definition must be an object'] };
  // Taskcluster's taskQueueId is accepted in place of provisionerId/workerType. Validation fills defaults in place,
  // so it works on a copy. Measured: skipping the copy for a graph's nodes (already copied by their substitution)
  // made each node about 10 µs slower to prepare (26.5-31.2 µs against 16.8-18.8), validation itself slower on the
  // uncloned objects; structuredClone's copies are kept.
  let candidate = structuredClone(input) as Record<string, unknown>;
  if (typeof candidate.taskQueueId === 'string') {
    const [provisionerId, workerType, ...rest] = candidate.taskQueueId.split('/');
    if (rest.length > 0 || !workerType) return { errors: ['taskQueueId must be <provisionerId>/<workerType>'] };
    // Both forms given: they must agree (the explicit fields used to win silently over taskQueueId).
    if ((candidate.provisionerId !== undefined && candidate.provisionerId !== provisionerId) || (candidate.workerType !== undefined && candidate.workerType !== workerType)) {
      return { errors: ['taskQueueId must equal <provisionerId>/<workerType> when those are given too'] };
    }
    const { taskQueueId: _q, ...others } = candidate;
    candidate = { ...others, provisionerId, workerType };
  }
  const validate = compile(taskDefinitionSchema);
  if (!validate(candidate)) return { errors: describeErrors(validate.errors, 'task').split('\n') };
  const def = candidate as unknown as TaskDefinition;
  const errors: string[] = [];
  // The schema's date-time format admits what Date cannot read (a leap second, 23:59:60): NaN would pass
  // every comparison below and fail only when the dates are written back.
  for (const field of ['created', 'deadline', 'expires'] as const) {
    if (def[field] !== undefined && readDate(def[field]).iso === undefined) {
      errors.push(`task.${field} ${JSON.stringify(def[field])} is not a date tgs can read (leap seconds are not supported)`);
    }
  }
  if (errors.length > 0) return { errors };
  const created = readDate(def.created).ms;
  const deadline = readDate(def.deadline).ms;
  if (Math.abs(created - now.getTime()) > FIFTEEN_MINUTES) errors.push('task.created must be within 15 minutes of the current time');
  if (deadline <= now.getTime()) errors.push('task.deadline must be in the future');
  if (deadline - created > FIVE_DAYS) errors.push('task.deadline must be at most 5 days after task.created');
  const expires = def.expires === undefined ? deadline + ONE_YEAR : readDate(def.expires).ms;
  if (expires < deadline) errors.push('task.expires must not be before task.deadline');
  if (def.dependencies.includes(taskId)) errors.push('a task cannot depend on itself');
  for (const scope of def.scopes) if (!isValidScope(scope)) errors.push(`invalid scope ${JSON.stringify(scope)}: at most one trailing *`);
  if (errors.length > 0) return { errors };
  return {
    definition: {
      ...def,
      taskGroupId: def.taskGroupId ?? taskId,
      created: readDate(def.created).iso as string,
      deadline: readDate(def.deadline).iso as string,
      expires: def.expires === undefined ? new Date(expires).toISOString() : (readDate(def.expires).iso as string),
    },
  };
}
