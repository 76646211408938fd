import type { BusChannel } from './bus.js';
import { allExchangeNames } from './exchanges.js';

/** Every tgs exchange, as a durable topic exchange. */
export async function declareExchanges(channel: Pick<BusChannel, 'assertExchange'>, prefix: string): Promise<void> {
  for (const name of allExchangeNames(prefix)) await channel.assertExchange(name, 'topic', { durable: true });
}
