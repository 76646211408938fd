import type { Config } from '../config.js';
import { queueExchangeName, taskRoutingKey, tgsExchangeName, type QueueExchange } from '../exchanges/exchanges.js';
import type { OutboxMessage } from '../exchanges/outbox.js';
import { assertMatches } from '../api/validate.js';
import { taskStatus, TASK_COLUMNS, type TaskRow } from './taskRow.js';

const messageSchema = {
  $id: 'tgs:queue-task-message',
  type: 'object',
  additionalProperties: false,
  required: ['version', 'status', 'task'],
  properties: {
    version: { const: 1 },
    status: {
      type: 'object',
      required: ['taskId', 'provisionerId', 'workerType', 'schedulerId', 'taskGroupId', 'deadline', 'expires', 'retriesLeft', 'state', 'runs'],
      properties: { state: { enum: ['unscheduled', 'pending', 'running', 'completed', 'failed', 'exception'] }, runs: { type: 'array' } },
    },
    runId: { type: 'integer', minimum: 0, maximum: 49 },
    workerGroup: { type: 'string' },
    workerId: { type: 'string' },
    takenUntil: { type: 'string' },
    task: { type: 'object', required: ['tags'], properties: { tags: { type: 'object' } } },
  },
};

/** Routing key and CC routes of a message about a task (worker words only once the run was claimed). */
export function taskRouting(row: TaskRow, runId: number | undefined, claimedBy?: { workerGroup?: string; workerId?: string }) {
  return {
    routingKey: taskRoutingKey({
      taskId: row.task_id,
      runId,
      workerGroup: claimedBy?.workerGroup,
      workerId: claimedBy?.workerId,
      provisionerId: row.provisioner_id,
      workerType: row.worker_type,
      schedulerId: row.scheduler_id,
      taskGroupId: row.task_group_id,
      routing: row.routing ?? undefined,
    }),
    cc: row.routes.map((r) => `route.${r}`),
  };
}

/**
 * A queue exchange message about a task, in Taskcluster's shape. `runId` is the run it concerns (none for
 * task-defined). The message id is derived from task, run, exchange and run count, so a transaction that
 * is retried writes the same id again.
 */
export function taskMessage(config: Config, exchange: QueueExchange, row: TaskRow, runId?: number): OutboxMessage {
  const run = runId === undefined ? undefined : row.runs[runId];
  const claimed = run && run.workerGroup !== undefined && exchange !== 'task-pending';
  const payload = {
    version: 1,
    status: taskStatus(row),
    ...(runId !== undefined ? { runId } : {}),
    ...(claimed ? { workerGroup: run.workerGroup, workerId: run.workerId } : {}),
    ...(exchange === 'task-running' && run?.takenUntil ? { takenUntil: run.takenUntil } : {}),
    task: { tags: row.tags ?? {} },
  };
  assertMatches(messageSchema, payload, 'message');
  return {
    exchange: queueExchangeName(config.exchangePrefix, exchange),
    ...taskRouting(row, runId, claimed ? run : undefined),
    payload,
    messageId: `${row.task_id}/${runId ?? '_'}/${exchange}/${row.runs.length}`,
  };
}

/**
 * The bridge's notice that a task created with dependencies has to join its group's workflow: the task-defined
 * message's routing key (so TGS_BRIDGE_SCHEDULER_IDS bindings select it alike), no CC routes, and only the ids as
 * payload. Tasks of a submitted graph never need one (the graph holds them already), so a graph's 10,000
 * task-defined messages no longer pass through the bridge's queue ahead of its first resolution.
 */
export function dependentTaskDefinedMessage(config: Config, row: TaskRow): OutboxMessage {
  return {
    exchange: tgsExchangeName(config.exchangePrefix, 'dependent-task-defined'),
    routingKey: taskRouting(row, undefined).routingKey,
    cc: [],
    payload: { version: 1, taskId: row.task_id, taskGroupId: row.task_group_id },
    messageId: `${row.task_id}/_/dependent-task-defined/${row.runs.length}`,
  };
}

/**
 * SQL: an INSERT of one outbox row per row of `from` (a CTE's RETURNING t.* of tasks just changed), each the row as a
 * TaskRow (the same columns a read returns) with its latest run, for the relay to render as an `exchange` message
 * (src/relay/relay.ts outboxMessage). The single statements that change tasks and announce them at once use it.
 */
export function renderedMessagesInsert(from: string, exchange: QueueExchange): string {
  return renderedInsert(from, `'${exchange}'`);
}

/**
 * renderedMessagesInsert for rows whose latest run was just resolved: each its resolution's exchange (task-completed,
 * task-failed or task-exception, as resolutionMessage picks it), from the row's state; the messages in the order of
 * `from`'s column `order` (outbox ids are the publish order).
 */
export function resolutionMessagesInsert(from: string, order: string): string {
  return renderedInsert(from, `'task-' || c.state`, order);
}

/** The INSERT of both: `exchange`, SQL over the rendered row `c`, names each row's exchange. */
function renderedInsert(from: string, exchange: string, order?: string): string {
  const sortKey = order ? `, ${order} AS sort_key` : '';
  return `INSERT INTO outbox (message_id, exchange, routing_key, payload, render)
    SELECT c.task_id || '/' || (jsonb_array_length(c.runs) - 1) || '/' || ${exchange}, '', '',
           jsonb_build_object('row', to_jsonb(c)${order ? ` - 'sort_key'` : ''}, 'runId', jsonb_array_length(c.runs) - 1), ${exchange}
    FROM (SELECT ${TASK_COLUMNS}${sortKey} FROM ${from}) c${order ? '\n    ORDER BY c.sort_key' : ''}`;
}

/** The message announcing a run's resolution. */
export function resolutionMessage(config: Config, row: TaskRow, runId: number): OutboxMessage {
  const state = row.runs[runId].state;
  const exchange: QueueExchange = state === 'completed' ? 'task-completed' : state === 'failed' ? 'task-failed' : 'task-exception';
  return taskMessage(config, exchange, row, runId);
}
