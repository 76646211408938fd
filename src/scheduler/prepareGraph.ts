import slugid from 'slugid';
import type { Config } from '../config.js';
import { validateTaskDefinition, type TaskDefinition } from '../queue/definition.js';
import type { GraphNodeInput } from './graphSchema.js';

export interface PreparedNode {
  label: string;
  taskId: string;
  /** labels this node requires (new or existing) */
  requires: string[];
  reruns: number;
  definition: TaskDefinition;
}

export interface ExistingNode {
  taskId: string;
  idx: number;
}

export type GraphErrors = Map<string, string[]>;

const SUBS_PATTERN = /^taskId:(.+)$/;
const TASK_ROUTING_PATTERN = /^[A-Za-z0-9_-]{0,10}$/;

/** Replaces every `{"$subs": "taskId:<label>"}` with that label's taskId; records bad ones. */
function substitute(value: unknown, taskIdOf: (label: string) => string | undefined, errors: string[]): unknown {
  if (Array.isArray(value)) return value.map((v) => substitute(v, taskIdOf, errors));
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  if ('$subs' in record) {
    const keys = Object.keys(record);
    const spec = record.$subs;
    const match = typeof spec === 'string' ? SUBS_PATTERN.exec(spec) : null;
    if (keys.length !== 1 || !match) {
      errors.push(`bad $subs ${JSON.stringify(record)}: expected exactly {"$subs": "taskId:<label>"}`);
      return value;
    }
    const taskId = taskIdOf(match[1]);
    if (taskId === undefined) {
      errors.push(`$subs names unknown label ${JSON.stringify(match[1])}`);
      return value;
    }
    return taskId;
  }
  // fromEntries defines own properties: assigning would turn a payload's own "__proto__" key into a prototype
  return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, substitute(v, taskIdOf, errors)]));
}

/** Labels on a cycle among the given nodes (Kahn's algorithm: what never reaches in-degree 0). */
export function labelsOnCycles(nodes: Map<string, { requires: string[] }>): string[] {
  const indegree = new Map<string, number>();
  const dependents = new Map<string, string[]>();
  for (const [label, node] of nodes) {
    let count = 0;
    for (const r of node.requires) {
      if (!nodes.has(r)) continue;
      count++;
      const list = dependents.get(r);
      if (list) list.push(label);
      else dependents.set(r, [label]);
    }
    indegree.set(label, count);
  }
  const queue = [...indegree].filter(([, d]) => d === 0).map(([l]) => l);
  let done = 0;
  while (queue.length > 0) {
    const label = queue.pop() as string;
    done++;
    for (const d of dependents.get(label) ?? []) {
      const left = (indegree.get(d) as number) - 1;
      indegree.set(d, left);
      if (left === 0) queue.push(d);
    }
  }
  if (done === nodes.size) return [];
  return [...indegree].filter(([, d]) => d > 0).map(([l]) => l).sort();
}

/**
 * Turns task-graph nodes (docs/formats.md) into queue task definitions: taskIds, `$subs`, schedulerId, taskGroupId, routing
 * `<graph.routing>.<task.routing>` (`_` for an empty part, so routing-key positions stay fixed) and
 * dependencies from `requires`. Collects every problem by label instead of stopping at the first.
 */
export function prepareGraphNodes(options: {
  config: Config;
  taskGraphId: string;
  graphRouting: string;
  tasks: Record<string, GraphNodeInput>;
  existing?: Map<string, ExistingNode>;
  now: Date;
}): { nodes: PreparedNode[]; errors: GraphErrors } {
  const { config, taskGraphId, graphRouting, tasks, now } = options;
  const existing = options.existing ?? new Map<string, ExistingNode>();
  const errors: GraphErrors = new Map();
  const fail = (label: string, message: string) => {
    const list = errors.get(label);
    if (list) list.push(message);
    else errors.set(label, [message]);
  };
  const newIds = new Map<string, string>();
  for (const label of Object.keys(tasks)) {
    if (existing.has(label)) fail(label, 'label already exists in this task-graph');
    newIds.set(label, slugid.nice());
  }
  const taskIdOf = (label: string) => newIds.get(label) ?? existing.get(label)?.taskId;

  const nodes: PreparedNode[] = [];
  for (const [label, node] of Object.entries(tasks)) {
    for (const r of node.requires) {
      if (r === label) fail(label, 'requires itself');
      else if (taskIdOf(r) === undefined) fail(label, `requires unknown label ${JSON.stringify(r)}`);
    }
    const subsErrors: string[] = [];
    const task = substitute(node.task, taskIdOf, subsErrors) as Record<string, unknown>;
    subsErrors.forEach((m) => fail(label, m));
    if (task.schedulerId !== undefined && task.schedulerId !== config.schedulerId) {
      fail(label, `task.schedulerId must be ${config.schedulerId} (or left out)`);
    }
    if (task.taskGroupId !== undefined && task.taskGroupId !== taskGraphId) {
      fail(label, 'task.taskGroupId must be the taskGraphId (or left out)');
    }
    if (task.dependencies !== undefined) fail(label, 'task.dependencies is set from requires: leave it out');
    const taskRouting = task.routing ?? '';
    if (typeof taskRouting !== 'string' || !TASK_ROUTING_PATTERN.test(taskRouting)) {
      fail(label, 'task.routing must be at most 10 characters of [A-Za-z0-9_-]');
      // not a string (an object without a prototype cannot even be printed): nothing below can use it
      continue;
    }
    const taskId = newIds.get(label) as string;
    const definitionInput = {
      ...task,
      schedulerId: config.schedulerId,
      taskGroupId: taskGraphId,
      routing: `${graphRouting || '_'}.${taskRouting || '_'}`,
      dependencies: node.requires.map((r) => taskIdOf(r)).filter((id): id is string => id !== undefined),
    };
    const result = validateTaskDefinition(definitionInput, taskId, now);
    if ('errors' in result) {
      result.errors.forEach((m) => fail(label, m));
      continue;
    }
    nodes.push({ label, taskId, requires: node.requires, reruns: node.reruns, definition: result.definition });
  }
  const cycle = labelsOnCycles(new Map(Object.entries(tasks)));
  for (const label of cycle) fail(label, 'is on a dependency cycle');
  return { nodes, errors };
}

/** One message naming every offending label (the first 50 in full). */
export function describeGraphErrors(errors: GraphErrors): string {
  const labels = [...errors.keys()].sort();
  const lines = labels.slice(0, 50).map((label) => `- ${label}: ${(errors.get(label) as string[]).join('; ')}`);
  if (labels.length > 50) lines.push(`- … and ${labels.length - 50} more labels`);
  return `Invalid task-graph: ${labels.length} task(s) have problems (${labels.join(', ').slice(0, 2000)}):\n${lines.join('\n')}`;
}
