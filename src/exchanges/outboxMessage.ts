import type { Config } from '../config.js';
import { taskMessage } from '../queue/messages.js';
import type { TaskRow } from '../queue/taskRow.js';
import type { OutboxRow } from './outboxStore.js';

/** A message as the relay publishes it. */
export interface RelayMessage {
  exchange: string;
  routingKey: string;
  cc: string[];
  payload: unknown;
  messageId: string;
}

/** The message an outbox row stands for: as written, or rendered from the task row snapshot it holds. */
export function outboxMessage(config: Config, row: OutboxRow): RelayMessage {
  if (row.render === null) return { exchange: row.exchange, routingKey: row.routing_key, cc: row.cc, payload: row.payload, messageId: row.message_id };
  const { row: snapshot, runId } = row.payload as { row: TaskRow & { deadline: string; expires: string; taken_until: string | null }; runId: number };
  const taskRow: TaskRow = {
    ...snapshot,
    deadline: new Date(snapshot.deadline),
    expires: new Date(snapshot.expires),
    taken_until: snapshot.taken_until === null ? null : new Date(snapshot.taken_until),
  };
  const message = taskMessage(config, row.render, taskRow, runId);
  return { exchange: message.exchange, routingKey: message.routingKey, cc: message.cc ?? [], payload: message.payload, messageId: message.messageId ?? row.message_id };
}
