import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import { createPool } from '../../db/pool.js';
import { migrate } from '../../db/migrate.js';
import { createSchedulerWorker, ensureSearchAttributes } from '../../worker.js';
import { onShutdown } from '../shutdown.js';

export function registerSchedulerWorkerCommand(program: Command): void {
  program
    .command('scheduler-worker')
    .description('run the Temporal worker for task-graph workflows and their activities')
    .action(async () => {
      const config = loadConfig();
      const pool = createPool(config.databaseUrl, 20);
      await migrate(pool);
      await ensureSearchAttributes(config);
      const { worker, connection } = await createSchedulerWorker({ config, pool });
      console.log(`tgs scheduler-worker: task queue ${config.temporalTaskQueue} on ${config.temporalAddress} (namespace ${config.temporalNamespace})`);
      const running = worker.run();
      onShutdown(async () => {
        worker.shutdown();
        await running;
        await connection.close();
        await pool.end();
      });
      await running;
    });
}
