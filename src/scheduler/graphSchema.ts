import type { JsonSchema } from '../api/endpoint.js';
import { CACHE_MODES, type CacheInput } from '../taskCache/spec.js';
import { CACHE_WORD } from '../taskCache/tiers.js';

/** Limits of one task-graph (the default of TGS_MAX_GRAPH_NODES: src/scheduler/nodeLimit.ts says what bounds it). */
export const MAX_GRAPH_TASKS = 300_000;
export const MAX_RERUNS = 100;
export const LABEL_PATTERN = '^[A-Za-z0-9_./:@+-]{1,255}$';

/** A node's `cache` (docs/formats.md § Cached tasks; src/taskCache). */
const cacheSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name: { type: 'string', pattern: CACHE_WORD.source },
    tier: { type: 'string', pattern: CACHE_WORD.source },
    digestData: {},
    // seconds, or a duration such as "7 days"
    maxAge: { oneOf: [{ type: 'integer', minimum: 0 }, { type: 'string', maxLength: 100 }] },
    mode: { enum: [...CACHE_MODES], default: 'use' },
  },
};

/** One node of a graph's `tasks` (validated one by one as the body streams in: src/scheduler/graphIntake.ts). */
export const graphNodeSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['task'],
  properties: {
    requires: { type: 'array', maxItems: 10_000, uniqueItems: true, items: { type: 'string', pattern: LABEL_PATTERN }, default: [] },
    reruns: { type: 'integer', minimum: 0, maximum: MAX_RERUNS, default: 0 },
    // validated as a task definition after $subs substitution, label by label
    task: { type: 'object' },
    cache: cacheSchema,
  },
};

const envelopeProperties = {
  routing: { type: 'string', maxLength: 10, pattern: '^[A-Za-z0-9_-]*$', default: '' },
  // CC routing keys `route.<route>` of the graph's scheduler messages, each needing `queue:route:<route>` of the
  // submitter (as a task's routes do): the words of a graph's messages a hook may bind to (docs/formats.md § Hooks)
  routes: {
    type: 'array',
    maxItems: 64,
    uniqueItems: true,
    items: { type: 'string', minLength: 1, maxLength: 249, pattern: '^[\\x21-\\x7e]*$' },
    default: [],
  },
  scopes: { type: 'array', maxItems: 1000, items: { type: 'string', pattern: '^[\\x20-\\x7e]*$' }, default: [] },
  metadata: {
    type: 'object',
    additionalProperties: false,
    properties: {
      name: { type: 'string', maxLength: 255 },
      description: { type: 'string', maxLength: 32768 },
      owner: { type: 'string', maxLength: 255 },
      source: { type: 'string', maxLength: 4096 },
    },
    default: {},
  },
  tags: { type: 'object', additionalProperties: { type: 'string', maxLength: 4096 }, default: {} },
  // overrides every cached node's mode: `refresh` runs them all and overwrites their entries, `off` neither looks
  // up nor writes (`tgs graph submit --refresh-cache` / `--no-cache`)
  cacheMode: { enum: [...CACHE_MODES], default: 'use' },
};

/** The task-graph format (docs/formats.md) plus optional scopes, metadata and tags. */
export const taskGraphSchema: JsonSchema = {
  $id: 'tgs:task-graph',
  type: 'object',
  additionalProperties: false,
  required: ['tasks'],
  properties: {
    ...envelopeProperties,
    tasks: {
      type: 'object',
      minProperties: 1,
      maxProperties: MAX_GRAPH_TASKS,
      propertyNames: { pattern: LABEL_PATTERN },
      additionalProperties: graphNodeSchema,
    },
  },
};

/** Everything of a task-graph but its `tasks`, which are validated node by node. */
export const graphEnvelopeSchema: JsonSchema = { type: 'object', additionalProperties: false, properties: envelopeProperties };

/** POST /task-graph/<id>/extend: new tasks, whose requires may name existing labels. */
export const extendSchema: JsonSchema = {
  $id: 'tgs:task-graph-extend',
  type: 'object',
  additionalProperties: false,
  required: ['tasks'],
  properties: {
    tasks: { type: 'object', minProperties: 1, maxProperties: MAX_GRAPH_TASKS, propertyNames: { pattern: LABEL_PATTERN }, additionalProperties: graphNodeSchema },
  },
};

export interface GraphNodeInput {
  requires: string[];
  reruns: number;
  task: Record<string, unknown>;
  cache?: CacheInput;
}

const statusProperties = {
  schedulerId: { type: 'string' },
  taskGraphId: { type: 'string' },
  state: { enum: ['running', 'blocked', 'finished', 'canceled', 'terminated'] },
  routing: { type: 'string' },
};

/** The task-graph status structure (docs/formats.md § Task-graph status). */
export const graphStatusSchema: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['schedulerId', 'taskGraphId', 'state', 'routing'],
  properties: statusProperties,
};
