import { Client, Connection } from '@temporalio/client';
import { NativeConnection, Worker, bundleWorkflowCode } from '@temporalio/worker';
import type { Activities } from '../../src/activities/index.js';
import { bundlerOptions, workflowsPath } from '../../src/temporal/workflowBundle.js';
import type { DevServer } from '../../src/temporal/devServer.js';
import { startTestTemporal } from './temporal.js';

let bundlePromise: ReturnType<typeof bundleWorkflowCode> | undefined;

/** The workflow bundle, built once per test process (webpack takes a few seconds). */
export function workflowBundle() {
  bundlePromise ??= bundleWorkflowCode({
    workflowsPath: workflowsPath(),
    webpackConfigHook: bundlerOptions?.webpackConfigHook,
    logger: { trace() {}, debug() {}, info() {}, warn() {}, error: (m: string) => console.error(m), log() {} } as never,
  });
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
