import type pg from 'pg';
import { NativeConnection, Worker, type WorkerOptions } from '@temporalio/worker';
import type { Config } from '../config.js';
import { createActivities } from '../activities/index.js';
import { Client, Connection } from '@temporalio/client';
import { connectionOptions } from '../temporal/connection.js';
import { claimTaskQueue } from '../temporal/deploymentClaim.js';
import { deploymentIdOf } from '../db/deployment.js';
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

/**
 * Claims the namespace + task queue for this deployment (src/temporal/deploymentClaim.ts), or throws
 * DeploymentConflictError, whose message is the one line to show: another deployment already polls it.
 */
export async function claimDeployment(config: Config, pool: pg.Pool): Promise<void> {
  const deploymentId = await deploymentIdOf(pool);
  const connection = await Connection.connect(connectionOptions(config));
  try {
    await claimTaskQueue(new Client({ connection, namespace: config.temporalNamespace }), config, deploymentId);
  } finally {
    await connection.close();
  }
}

/** The Temporal worker: the taskGraph workflow and its activities (src/activities), once the task queue is claimed. */
export async function createSchedulerWorker(options: SchedulerWorkerOptions): Promise<{ worker: Worker; connection: NativeConnection }> {
  const { config, pool } = options;
  await claimDeployment(config, pool);
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
