import type { Channel } from 'amqplib';
import { allExchangeNames } from './exchanges.js';

/** Every tgs exchange, as a durable topic exchange. */
export async function declareExchanges(channel: Channel, prefix: string): Promise<void> {
  for (const name of allExchangeNames(prefix)) await channel.assertExchange(name, 'topic', { durable: true });
}
