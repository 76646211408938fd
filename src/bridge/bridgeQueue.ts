import type { Config } from '../config.js';
import type { BusChannel } from '../exchanges/bus.js';
import { queueExchangeName, tgsExchangeName } from '../exchanges/exchanges.js';
import { bridgeBindings } from './messages.js';

/**
 * How often a message of a quorum bridge queue may come back before RabbitMQ dead-letters it: with a limit of N it
 * is delivered N + 1 times and dead-lettered at its (N + 1)th return (RabbitMQ 3.10, measured: the contract case in
 * test/contract/exchange.test.ts). RabbitMQ 3.x counts every return: the bridge's own requeue of a failing graph's
 * messages, and the unacked messages (up to the prefetch, 2,000) that a lost connection gives back (a node
 * failover, a bridge restart or crash). A graph whose signal keeps failing has its messages requeued after 250 ms
 * doubling to 30 s (src/graphSignals/signalBackoff.ts): 8 returns take ~1 min and each after that 30 s, so 51 returns
 * are ~22 minutes of that graph refusing signals, long past a Temporal restart or a history-service failover, with
 * room for a few dozen lost connections besides. A whole flush failing (Postgres or the Temporal connection down)
 * requeues after at most 10 s: its messages are dead-lettered after ~8 minutes of that outage. A message that
 * crashes every bridge taking it stops after 51 crashes instead of for ever (the other unacked messages of those
 * bridges count those crashes too). Dead-lettering loses no resolution for a graph: a graph's workflow that hears
 * nothing for 60 s reads its live tasks' latest runs from the queue (reconcileWhenQuiet in
 * src/workflows/graphRun.ts), so a dead-lettered message costs a delay, not a hang. A lower limit would dead-letter
 * the messages of a Temporal outage of a few minutes (each then waits for its graph's reconciliation); a higher one
 * keeps a poison message longer. Change it with a RabbitMQ policy (`delivery-limit`): the queue's own argument
 * cannot change in place.
 */
export const BRIDGE_DELIVERY_LIMIT = 50;

/**
 * The dead-lettered messages of the bridge queue stay here for an operator to look at, at most this many
 * (the oldest go first): nothing consumes them, and the graphs they were for reconcile on their own.
 */
export const DEAD_LETTER_MAX = 100_000;

/** The exchange and the queue that receive the bridge queue's dead-lettered messages (quorum queues only). */
export function bridgeDeadLetterName(config: Pick<Config, 'exchangePrefix' | 'schedulerId'>): string {
  return `${config.exchangePrefix}tgs/scheduler-bridge-dead/${config.schedulerId}`;
}

/**
 * The bridge queue's declare arguments. A classic queue has none (as every bridge before quorum queues declared
 * it, so such a queue is still declared unchanged); a quorum queue is replicated on every node of the cluster,
 * survives the loss of a minority of them, and has a delivery limit with a dead-letter target.
 */
export function bridgeQueueArguments(config: Pick<Config, 'exchangePrefix' | 'schedulerId' | 'bridgeQueueType'>): Record<string, unknown> {
  if (config.bridgeQueueType === 'classic') return {};
  return {
    'x-queue-type': 'quorum',
    'x-delivery-limit': BRIDGE_DELIVERY_LIMIT,
    'x-dead-letter-exchange': bridgeDeadLetterName(config),
    'x-dead-letter-routing-key': 'dead',
  };
}

const DEAD_LETTER_ARGUMENTS = { 'x-queue-type': 'quorum', 'x-max-length': DEAD_LETTER_MAX };

/** How many messages the dead-letter queue holds (declared again with its own arguments, which answers its depth). */
export async function deadLetterDepth(ch: BusChannel, config: Pick<Config, 'exchangePrefix' | 'schedulerId'>): Promise<number> {
  return (await ch.assertQueue(bridgeDeadLetterName(config), { durable: true, arguments: DEAD_LETTER_ARGUMENTS })).messageCount;
}

/** RabbitMQ refused the bridge queue's declaration because a queue of that name exists with other arguments. */
export class BridgeQueueMismatchError extends Error {}

/** The AMQP reply code of a channel error (amqplib puts it in `code`). */
function replyCode(err: unknown): unknown {
  return (err as { code?: unknown } | null)?.code;
}

/**
 * The type of the queue RabbitMQ refused to redeclare, read from its PRECONDITION_FAILED text. RabbitMQ names the
 * first argument that differs, not always x-queue-type: declaring the quorum queue where an earlier bridge's classic
 * queue (no arguments) exists says "inequivalent arg 'x-dead-letter-exchange' for queue '…' in vhost '/': received
 * the value '…' of type 'longstr' but current is none" (RabbitMQ 3.10), and AMQP cuts the text at 255 characters,
 * so with a long queue name its end ("current is none") is gone: what decides is the argument it names.
 */
function existingType(wanted: 'quorum' | 'classic', serverMessage: string): 'quorum' | 'classic' | undefined {
  const arg = /inequivalent arg '([^']+)'/.exec(serverMessage)?.[1];
  const current = /current is (?:the value )?'([^']*)'/.exec(serverMessage)?.[1];
  const other = wanted === 'quorum' ? 'classic' : 'quorum';
  if (arg === 'x-queue-type') return current === 'quorum' || current === 'classic' ? current : other;
  // the queue lacks the dead-letter target every quorum bridge queue has: an earlier bridge's classic queue
  if (wanted === 'quorum' && (arg === 'x-dead-letter-exchange' || arg === 'x-dead-letter-routing-key') && current === undefined) return 'classic';
  // the queue has an argument a classic bridge queue never has: a quorum bridge queue
  if (wanted === 'classic' && /received none/.test(serverMessage)) return 'quorum';
  return undefined;
}

/** What an operator does when RabbitMQ refuses the bridge queue's declaration (406): which queue exists, and the ways out. */
export function queueMismatchAdvice(queueName: string, wanted: 'quorum' | 'classic', serverMessage: string): string {
  const existing = existingType(wanted, serverMessage);
  const keep = existing && existing !== wanted ? `set TGS_BRIDGE_QUEUE_TYPE=${existing} to keep using it as it is, or ` : '';
  return (
    `RabbitMQ refused to declare ${queueName} as a ${wanted} queue: ${existing && existing !== wanted ? `it exists as a ${existing} queue` : 'it exists with other arguments'} ` +
    `(${serverMessage}), and a queue's type and arguments cannot change in place. Either ${keep}` +
    `stop every bridge, let the queue drain (or move its messages with a shovel), delete it (rabbitmqctl delete_queue '${queueName}') ` +
    `and start the bridges again (docs/deployments.md, "The bridge queue: classic to quorum")`
  );
}

/**
 * Declares the bridge queue (and, for a quorum queue, its dead-letter exchange and queue) and its bindings.
 * A declaration RabbitMQ refuses as inequivalent (406) throws BridgeQueueMismatchError saying what to do; the
 * channel is closed by then.
 */
export async function declareBridgeQueue(ch: BusChannel, config: Config, queueName: string): Promise<void> {
  const args = bridgeQueueArguments(config);
  if (config.bridgeQueueType === 'quorum') {
    const dead = bridgeDeadLetterName(config);
    await ch.assertExchange(dead, 'topic', { durable: true });
    // quorum too: a classic queue lives on one node, and while that node is down its declaration fails, which would
    // keep every bridge from starting
    await ch.assertQueue(dead, { durable: true, arguments: DEAD_LETTER_ARGUMENTS }).catch((err: unknown) => {
      throw replyCode(err) === 406 ? new BridgeQueueMismatchError(queueMismatchAdvice(dead, 'quorum', (err as Error).message)) : err;
    });
    await ch.bindQueue(dead, dead, '#');
  }
  try {
    await ch.assertQueue(queueName, { durable: true, arguments: args });
  } catch (err) {
    if (replyCode(err) === 406) throw new BridgeQueueMismatchError(queueMismatchAdvice(queueName, config.bridgeQueueType, (err as Error).message));
    throw err;
  }
  // Resolutions reach graphs from Postgres, through the relay's graph-signal lane (src/relay/graphSignalLane.ts): the
  // queue is bound to the dependent-task-defined notices alone.
  const dependentDefined = tgsExchangeName(config.exchangePrefix, 'dependent-task-defined');
  await ch.assertExchange(dependentDefined, 'topic', { durable: true });
  for (const pattern of bridgeBindings(config)) await ch.bindQueue(queueName, dependentDefined, pattern);
  // Bindings earlier bridges made and this one does not want: every task-defined message (before the
  // dependent-task-defined notice), and the resolution exchanges (before the lane). A kept binding would still route
  // those messages through this queue. What such bindings queued before an upgrade is still served (src/bridge/bridge.ts).
  // Unbinding what is not bound is a no-op.
  for (const exchange of UNBOUND_EXCHANGES) {
    const name = queueExchangeName(config.exchangePrefix, exchange);
    await ch.assertExchange(name, 'topic', { durable: true });
    for (const pattern of bridgeBindings(config)) await ch.unbindQueue(queueName, name, pattern);
  }
}

/** The queue exchanges an earlier bridge bound its queue to and this one unbinds. */
export const UNBOUND_EXCHANGES = ['task-defined', 'task-completed', 'task-failed', 'task-exception'] as const;
