import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker } from '@temporalio/worker';
import type { Activities } from '../src/activities/index.js';
import { loadWorkflowBundle } from '../src/temporal/workflowBundle.js';
import type { DevServer } from '../src/temporal/devServer.js';
import { startTestTemporal } from './temporal.js';

let bundlePromise: ReturnType<typeof loadWorkflowBundle> | undefined;

/** The workflow bundle, once per test process (webpack runs only when the sources changed: src/temporal/workflowBundle.ts). */
export function workflowBundle() {
  bundlePromise ??= loadWorkflowBundle();
  return bundlePromise;
}

export interface WorkflowEnv {
  server: DevServer;
  client: Client;
  taskQueue: string;
  worker: Worker;
  stop(): Promise<void>;
}

/** A Temporal dev server, a client and a worker running the real workflow with the given activities. */
export async function startWorkflowEnv(activities: Activities, options: { dynamicConfig?: Record<string, string | number | boolean> } = {}): Promise<WorkflowEnv> {
  const server = await startTestTemporal({ dynamicConfig: options.dynamicConfig });
  const taskQueue = 'tgs-test';
  const nativeConnection = await NativeConnection.connect({ address: server.address });
  const worker = await Worker.create({
    connection: nativeConnection,
    taskQueue,
    workflowBundle: await workflowBundle(),
    activities,
  });
  const running = worker.run();
  const connection = await Connection.connect({ address: server.address });
  const client = new Client({ connection });
  return {
    server,
    client,
    taskQueue,
    worker,
    async stop() {
      worker.shutdown();
      await running;
      await nativeConnection.close();
      await connection.close();
      await server.stop();
    },
  };
}
