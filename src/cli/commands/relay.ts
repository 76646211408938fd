import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import { startRelay } from '../../exchanges/relay.js';
import { onShutdown } from '../shutdown.js';

export function registerRelayCommand(program: Command): void {
  program
    .command('relay')
    .description('publish the Postgres outbox to RabbitMQ (one active relay at a time; others stand by)')
    .action(async () => {
      const relay = await startRelay({ config: loadConfig() });
      const timer = setInterval(() => console.log(`relay: ${JSON.stringify(relay.stats)}`), 30_000);
      onShutdown(async () => {
        clearInterval(timer);
        await relay.stop();
      });
    });
}
