import type { ScopeExpression } from '../auth/scopes.js';

/** Priorities from highest to lowest; `normal` is treated as `lowest` (docs/formats.md § Task definition). */
export const PRIORITIES = ['highest', 'very-high', 'high', 'medium', 'low', 'very-low', 'lowest'] as const;

/**
 * What createTask demands of its caller (Taskcluster's rules): every scope the task carries,
 * `queue:route:<route>` per route, `queue:scheduler-id:<schedulerId>`, and
 * `queue:create-task:<priority>:<provisionerId>/<workerType>` where a higher priority's scope also serves.
 */
export function createTaskScopes(task: {
  scopes?: string[];
  routes?: string[];
  schedulerId: string;
  priority?: string;
  provisionerId: string;
  workerType: string;
}): ScopeExpression {
  const priority = !task.priority || task.priority === 'normal' ? 'lowest' : task.priority;
  const rank = PRIORITIES.indexOf(priority as (typeof PRIORITIES)[number]);
  const acceptable = PRIORITIES.slice(0, rank < 0 ? PRIORITIES.length : rank + 1);
  return {
    AllOf: [
      ...(task.scopes ?? []),
      ...(task.routes ?? []).map((r) => `queue:route:${r}`),
      `queue:scheduler-id:${task.schedulerId}`,
      { AnyOf: acceptable.map((p) => `queue:create-task:${p}:${task.provisionerId}/${task.workerType}`) },
    ],
  };
}
