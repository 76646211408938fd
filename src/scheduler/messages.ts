import type { Config } from '../config.js';
import { graphRoutingKey, schedulerExchangeName, type SchedulerExchange } from '../exchanges/exchanges.js';
import type { OutboxMessage } from '../exchanges/outbox.js';
import { assertMatches } from '../api/validate.js';
import { graphStatusSchema } from './graphSchema.js';
import type { GraphState } from '../workflows/contract.js';

/** Body of every scheduler exchange message (docs/formats.md § Scheduler exchanges): the task-graph status, plus the blocking task. */
export const graphMessageSchema = {
  $id: 'tgs:task-graph-message',
  type: 'object',
  additionalProperties: false,
  required: ['version', 'status'],
  properties: {
    version: { const: 1 },
    status: graphStatusSchema,
    taskId: { type: 'string', pattern: '^[A-Za-z0-9_-]{22}$' },
    blockedBy: { type: 'array', items: { type: 'string' } },
    taskCount: { type: 'integer', minimum: 0 },
  },
};

export function graphMessage(
  config: Config,
  graph: { taskGraphId: string; schedulerId: string; routing: string; routes?: string[]; state: GraphState; taskCount: number; resumes?: number },
  exchange: SchedulerExchange,
  seq: number,
  blockedBy: string[],
): OutboxMessage {
  const payload = {
    version: 1,
    status: { schedulerId: graph.schedulerId, taskGraphId: graph.taskGraphId, state: graph.state, routing: graph.routing },
    taskCount: graph.taskCount,
    ...(exchange === 'task-graph-blocked' && blockedBy.length > 0 ? { taskId: blockedBy[0], blockedBy: blockedBy.slice(0, 100) } : {}),
  };
  assertMatches(graphMessageSchema, payload, 'message');
  return {
    exchange: schedulerExchangeName(config.exchangePrefix, exchange),
    routingKey: graphRoutingKey(graph.schedulerId, graph.taskGraphId, graph.routing),
    // Taskcluster's CC keys, as a task's messages carry them: granted by `queue:route:` scopes at submit, so the only
    // words of a graph message a hook binding can trust (src/hooks/bindings.ts)
    ...(graph.routes && graph.routes.length > 0 ? { cc: graph.routes.map((r) => `route.${r}`) } : {}),
    payload,
    // The workflow numbers each exchange's messages, so a retried activity repeats the same id; a resumed graph's
    // workflow numbers them anew, under the count of resumes (docs/formats.md § Scheduler exchanges).
    messageId: `${graph.taskGraphId}/${exchange}/${graph.resumes ? `${graph.resumes}.` : ''}${seq}`,
  };
}
