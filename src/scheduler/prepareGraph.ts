import type { Config } from '../config.js';
import { validateTaskDefinition, type TaskDefinition } from '../queue/definition.js';
import { LABEL_PATTERN, type GraphNodeInput } from './graphSchema.js';

export type GraphErrors = Map<string, string[]>;

const SUBS_PATTERN = /^taskId:(.+)$/;
const LABEL = new RegExp(LABEL_PATTERN);
const TASK_ROUTING_PATTERN = /^[A-Za-z0-9_-]{0,10}$/;

/**
 * Replaces every `{"$subs": "taskId:<label>"}` with that label's taskId; records malformed ones. A part without any
 * `$subs` is returned as it is, not copied: validateTaskDefinition copies the whole definition anyway.
 */
export function substitute(value: unknown, taskIdOf: (label: string) => unknown, errors: string[]): unknown {
  if (Array.isArray(value)) {
    let copy: unknown[] | undefined;
    for (let i = 0; i < value.length; i++) {
      const item = substitute(value[i], taskIdOf, errors);
      if (copy === undefined && item !== value[i]) copy = value.slice(0, i);
      copy?.push(item);
    }
    return copy ?? value;
  }
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
    // a name no label can have is refused here: the intake keeps only names that could be defined
    if (!LABEL.test(match[1])) {
      errors.push(`bad $subs ${JSON.stringify(record).slice(0, 300)}: ${JSON.stringify(match[1].slice(0, 300))} is not a label (labels match ${LABEL_PATTERN})`);
      return value;
    }
    return taskIdOf(match[1]);
  }
  const entries = Object.entries(record);
  let copy: [string, unknown][] | undefined;
  for (let i = 0; i < entries.length; i++) {
    const [key, field] = entries[i];
    const item = substitute(field, taskIdOf, errors);
    if (copy === undefined && item !== field) copy = entries.slice(0, i);
    copy?.push([key, item]);
  }
  // fromEntries defines own properties: assigning would turn a payload's own "__proto__" key into a prototype
  return copy === undefined ? record : Object.fromEntries(copy);
}

/**
 * Turns one task-graph node (docs/formats.md) into a queue task definition: `$subs` replaced by taskIds,
 * schedulerId, taskGroupId, routing `<graph.routing>.<task.routing>` (`_` for an empty part, so routing-key
 * positions stay fixed) and dependencies from `requires`. Every problem is returned, not just the first.
 * `taskIdOf` gives any label's taskId (labels named before they are defined get theirs at first mention);
 * `onSubs` hears each label a `$subs` names, for the caller to check it is defined in the end.
 */
export function prepareNode(options: {
  config: Config;
  taskGraphId: string;
  graphRouting: string;
  label: string;
  node: GraphNodeInput;
  taskId: string;
  taskIdOf: (label: string) => string;
  onSubs: (label: string) => void;
  now: Date;
}): { definition: TaskDefinition } | { errors: string[] } {
  const { config, taskGraphId, graphRouting, node, taskId, taskIdOf, now } = options;
  const errors: string[] = [];
  const task = substitute(node.task, (label) => {
    options.onSubs(label);
    return taskIdOf(label);
  }, errors) as Record<string, unknown>;
  if (task.schedulerId !== undefined && task.schedulerId !== config.schedulerId) {
    errors.push(`task.schedulerId must be ${config.schedulerId} (or left out)`);
  }
  if (task.taskGroupId !== undefined && task.taskGroupId !== taskGraphId) {
    errors.push('task.taskGroupId must be the taskGraphId (or left out)');
  }
  if (task.dependencies !== undefined) errors.push('task.dependencies is set from requires: leave it out');
  const taskRouting = task.routing ?? '';
  if (typeof taskRouting !== 'string' || !TASK_ROUTING_PATTERN.test(taskRouting)) {
    // not a string (an object without a prototype cannot even be printed): nothing below can use it
    errors.push('task.routing must be at most 10 characters of [A-Za-z0-9_-]');
    return { errors };
  }
  const definitionInput = {
    ...task,
    schedulerId: config.schedulerId,
    taskGroupId: taskGraphId,
    routing: `${graphRouting || '_'}.${taskRouting || '_'}`,
    dependencies: [...new Set(node.requires.filter((r) => r !== options.label))].map((r) => taskIdOf(r)),
  };
  const result = validateTaskDefinition(definitionInput, taskId, now);
  if ('errors' in result) errors.push(...result.errors);
  return errors.length > 0 ? { errors } : result;
}

/** One message naming every offending label (the first 50 in full). */
export function describeGraphErrors(errors: GraphErrors): string {
  const labels = [...errors.keys()].sort();
  const lines = labels.slice(0, 50).map((label) => `- ${label}: ${(errors.get(label) as string[]).join('; ')}`);
  if (labels.length > 50) lines.push(`- … and ${labels.length - 50} more labels`);
  return `Invalid task-graph: ${labels.length} task(s) have problems (${labels.join(', ').slice(0, 2000)}):\n${lines.join('\n')}`;
}
