import type { Command } from 'commander';
import { createPool } from '../../db/pool.js';
import { migrate } from '../../db/migrate.js';
import { installTemporalRuntime } from '../../temporal/runtime.js';
import { ensureSearchAttributes } from '../../temporal/searchAttributes.js';
import { createSchedulerWorker } from '../../processes/schedulerWorker.js';
import { registerService } from '../service.js';
import { onShutdown } from '../shutdown.js';
import { untilConnected } from '../../untilConnected.js';

export function registerSchedulerWorkerCommand(program: Command): void {
  registerService(program, 'scheduler-worker', 'run the Temporal worker for task-graph workflows and their activities', async ({ config, log, metrics }) => {
    const pool = createPool(config.databaseUrl, 20);
    const state: { started?: Awaited<ReturnType<typeof createSchedulerWorker>>; running?: Promise<void> } = {};
    // From the start, not once the worker runs: the Temporal runtime takes over SIGTERM (to shut its workers
    // down), so a process still waiting for Postgres or Temporal, or bundling, would otherwise ignore it.
    onShutdown(async () => {
      if (state.started) {
        state.started.worker.shutdown();
        await state.running;
        await state.started.connection.close();
      }
      await pool.end();
    });
    const started = await (async () => {
      // Before any worker connection: the SDK's logs become pino lines, its metrics join /metrics.
      await installTemporalRuntime({ log, metrics: metrics !== undefined });
      // Started together with (or before) Postgres and Temporal, as compose and a restart after an outage
      // do: wait for each instead of exiting.
      const line = (text: string) => log.warn(`tgs scheduler-worker: ${text}`);
      await untilConnected('Postgres', () => migrate(pool), line);
      await untilConnected(`Temporal at ${config.temporalAddress}`, () => ensureSearchAttributes(config), line);
      return untilConnected(`Temporal at ${config.temporalAddress}`, () => createSchedulerWorker({ config, pool, log }), line);
    })().catch(async (err: unknown) => {
      await metrics?.close();
      await pool.end();
      throw err;
    });
    log.info(
      { taskQueue: config.temporalTaskQueue, temporalAddress: config.temporalAddress, namespace: config.temporalNamespace },
      `tgs scheduler-worker: task queue ${config.temporalTaskQueue} on ${config.temporalAddress} (namespace ${config.temporalNamespace})`,
    );
    state.started = started;
    const running = started.worker.run();
    state.running = running;
    try {
      await running;
    } finally {
      await metrics?.close();
    }
  });
}
