import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import { createPool } from '../../db/pool.js';
import { startBridge } from '../../bridge/bridge.js';
import { LazyTemporalClient } from '../../temporal/connection.js';
import { onShutdown } from '../shutdown.js';

export function registerBridgeCommand(program: Command): void {
  program
    .command('bridge')
    .description('forward task resolutions from RabbitMQ to task-graph workflows as batched signals')
    .action(async () => {
      const config = loadConfig();
      const pool = createPool(config.databaseUrl, 5);
      const temporal = new LazyTemporalClient(config);
      const bridge = await startBridge({ config, pool, temporal: () => temporal.get() });
      // Counts every 30 s so an operator sees the bridge working.
      const timer = setInterval(() => console.log(`tgs bridge: ${JSON.stringify(bridge.stats)}`), 30_000);
      onShutdown(async () => {
        clearInterval(timer);
        await bridge.stop();
        await temporal.close();
        await pool.end();
      });
    });
}
