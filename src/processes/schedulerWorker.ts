import type pg from 'pg';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import type { Config } from '../config.js';
import { createActivities } from '../activities/index.js';
import { connectionOptions } from '../temporal/connection.js';
import { loadWorkflowBundle } from '../temporal/workflowBundle.js';
import type { Logger } from '../log.js';

// The scheduler worker process's composition root: the workflow bundle, the activities over this process's pool
// and config, one Temporal worker. `tgs scheduler-worker` and `tgs dev` start it.

export interface SchedulerWorkerOptions {
  config: Config;
  pool: pg.Pool;
  /** Reuse a bundle (tests bundle once per file). */
  workflowBundle?: WorkerOptions['workflowBundle'];
  connection?: NativeConnection;
  /** The activities' logger (src/log.ts). */
  log?: Logger;
}

/** The Temporal worker: the taskGraph workflow and its activities (src/activities). */
export async function createSchedulerWorker(options: SchedulerWorkerOptions): Promise<{ worker: Worker; connection: NativeConnection }> {
  const { config, pool } = options;
  const connection = options.connection ?? (await NativeConnection.connect(connectionOptions(config)));
  const worker = await Worker.create({
    connection,
    namespace: config.temporalNamespace,
    taskQueue: config.temporalTaskQueue,
    activities: createActivities({ config, pool, log: options.log }),
    workflowBundle: options.workflowBundle ?? (await loadWorkflowBundle()),
    // Graph workflows are long-lived and small in memory; keep many cached to avoid replays.
    maxCachedWorkflows: 2000,
  });
  return { worker, connection };
}
