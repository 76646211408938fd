import type { Config } from '../config.js';
import type { BusChannel, BusConnection } from '../exchanges/bus.js';
import { consumerChannel } from '../exchanges/busReconnect.js';
import { hookListenerQueueName } from './listenerBindings.js';

/**
 * The hook listener queue's bound (security review 2026-11-28, finding 8): bindings on busy exchanges and a listener
 * that fires one message at a time (a second of render each, for a slow hook) let the queue grow without end on the
 * broker. At most HOOK_LISTENER_MAX_LENGTH messages wait; past that RabbitMQ drops the oldest (its default overflow,
 * `drop-head`, which never refuses the relay's publish: `reject-publish` would nack it and hold up every other
 * message of the outbox) into the dead-letter queue `<prefix>tgs/hook-listener-dead/<schedulerId>`, as the bridge's
 * dead letters (src/bridge/bridgeQueue.ts), kept for an operator, the oldest going first past its own bound. A
 * dead-lettered message fires no hook: hooks bound to messages are best-effort past this backlog. 10,000 is an hour
 * of the slowest hooks' messages (a full second each, below which renders are cut), while a message of an ordinary
 * hook takes milliseconds.
 */
export const HOOK_LISTENER_MAX_LENGTH = 10_000;
export const HOOK_LISTENER_DEAD_MAX = 100_000;

export function hookListenerDeadName(config: Pick<Config, 'exchangePrefix' | 'schedulerId'>): string {
  return `${config.exchangePrefix}tgs/hook-listener-dead/${config.schedulerId}`;
}

export function hookListenerQueueArguments(config: Pick<Config, 'exchangePrefix' | 'schedulerId'>): Record<string, unknown> {
  return {
    'x-max-length': HOOK_LISTENER_MAX_LENGTH,
    'x-dead-letter-exchange': hookListenerDeadName(config),
    'x-dead-letter-routing-key': 'dead',
  };
}

/**
 * Declares the dead-letter exchange and queue, then the listener queue with its bound, on a channel of `conn`, and
 * answers the channel to consume on. A listener queue declared before the bound (no arguments) cannot change in
 * place (RabbitMQ answers 406 and closes the channel): it is used as it is on a new channel, and `log` says how to
 * get the bound (delete the queue while the listeners are stopped; they declare it again and rebind every hook).
 */
export async function declareHookListenerQueue(conn: BusConnection, config: Config, prefetch: number, log: (line: string) => void): Promise<BusChannel> {
  const queueName = hookListenerQueueName(config);
  const dead = hookListenerDeadName(config);
  let ch = await consumerChannel(conn, prefetch);
  await ch.assertExchange(dead, 'topic', { durable: true });
  await ch.assertQueue(dead, { durable: true, arguments: { 'x-max-length': HOOK_LISTENER_DEAD_MAX } });
  await ch.bindQueue(dead, dead, '#');
  try {
    await ch.assertQueue(queueName, { durable: true, arguments: hookListenerQueueArguments(config) });
  } catch (err) {
    if ((err as { code?: unknown }).code !== 406) throw err;
    ch = await consumerChannel(conn, prefetch);
    await ch.assertQueue(queueName, { durable: true });
    log(
      `hook listener: ${queueName} was declared without its length bound (${(err as Error).message}); it is used unbounded. ` +
        `To bound it, stop the bridges, delete it (rabbitmqctl delete_queue '${queueName}') and start them again: they declare it with the bound and bind every hook's bindings`,
    );
  }
  return ch;
}
