import { randomBytes } from 'node:crypto';
import { NativeConnection, Worker } from '@temporalio/worker';
import { Client, Connection } from '@temporalio/client';
import type { Config } from '../src/config.js';
import { createActivities } from '../src/activities/index.js';
import { claimDeployment } from '../src/processes/schedulerWorker.js';
import { releaseTaskQueue } from '../src/temporal/deploymentClaim.js';
import { deploymentIdOf } from '../src/db/deployment.js';
import { ensureSearchAttributes } from '../src/temporal/searchAttributes.js';
import { bridgeQueueName, startBridge } from '../src/bridge/bridge.js';
import { bridgeDeadLetterName } from '../src/bridge/bridgeQueue.js';
import { deploymentMarkerName } from '../src/bridge/deploymentMarker.js';
import { connectBus } from '../src/exchanges/bus.js';
import { startRelay } from '../src/relay/relay.js';
import type { ChildProcess } from 'node:child_process';
import { ApiClient } from '../src/client/http.js';
import { startTestApi, type TestApi } from './api.js';
import { startTestTemporal } from './temporal.js';
import { workflowBundle } from './workflowEnv.js';

/** The Temporal server a stack uses: its own dev server, or one it was given (`temporalAddress`), which it leaves running. */
export interface StackTemporal {
  address: string;
  /** the dev server's process; undefined for a given server */
  process?: ChildProcess;
  stop(): Promise<void>;
}

export interface Stack {
  api: TestApi;
  config: Config;
  temporal: StackTemporal;
  client: Client;
  root: ApiClient;
  bridge: Awaited<ReturnType<typeof startBridge>> | undefined;
  /** undefined with `inProcessRelay: false` (the bench runs `tgs relay` as its own process) */
  relay: Awaited<ReturnType<typeof startRelay>> | undefined;
  /** Stops or restarts the scheduler worker (tests that kill it). */
  startWorker(): Promise<void>;
  stopWorker(): Promise<void>;
  stop(): Promise<void>;
}

/**
 * Everything a graph needs, for real: Postgres (own database), the API, the outbox relay and the bridge
 * on RabbitMQ (own exchange prefix, so test files never see each other's messages), a Temporal dev
 * server (or the given `temporalAddress`) and the scheduler worker.
 */
export async function startStack(
  options: {
    configOverrides?: Partial<Config>;
    dynamicConfig?: Record<string, string | number | boolean>;
    /** false: the test runs the bridge / scheduler worker itself (e.g. as processes it kills) */
    inProcessBridge?: boolean;
    inProcessWorker?: boolean;
    inProcessRelay?: boolean;
    /** false: start Temporal without tgs's search attributes, so the worker has to register them */
    registerSearchAttributes?: boolean;
    /** where the API (claim waiter, sweeps), the bridge and the relay log (default: the API to stderr, the rest nowhere) */
    log?: (line: string) => void;
    /** the Postgres server the stack's database is created on (default: the tests' server, support/db.ts) */
    postgresUrl?: string;
    /**
     * Use this Temporal frontend (e.g. a cluster of support/temporalCluster.ts) instead of starting a dev server;
     * its namespace gets tgs's search attributes from the scheduler worker, as in production. `stop()` leaves it up.
     */
    temporalAddress?: string;
  } = {},
): Promise<Stack> {
  const temporal: StackTemporal = options.temporalAddress
    ? { address: options.temporalAddress, stop: async () => undefined }
    : await startTestTemporal({
        dynamicConfig: options.dynamicConfig,
        ...(options.registerSearchAttributes === false ? { searchAttributes: {} } : {}),
      });
  const prefix = `test-${randomBytes(4).toString('hex')}/`;
  const api = await startTestApi({
    temporalAddress: temporal.address,
    exchangePrefix: prefix,
    temporalTaskQueue: 'tgs-scheduler',
    ...options.configOverrides,
  }, { postgresUrl: options.postgresUrl, ...(options.log ? { log: (line: string) => options.log?.(`api: ${line}`) } : {}) });
  const config = api.config;
  const connection = await Connection.connect({ address: temporal.address });
  const client = new Client({ connection });
  const relay =
    options.inProcessRelay === false
      ? undefined
      : await startRelay({ config, log: options.log ? (line) => options.log?.(`relay: ${line}`) : () => undefined, temporal: async () => client });
  const bridge = options.inProcessBridge === false ? undefined : await startBridge({ config, pool: api.db.pool, temporal: async () => client, log: options.log ?? (() => undefined) });
  let worker: { worker: Worker; running: Promise<void>; connection: NativeConnection } | undefined;
  const startWorker = async () => {
    await ensureSearchAttributes(config);
    // as `tgs scheduler-worker` does: refused (DeploymentConflictError) where another deployment claimed the task queue
    await claimDeployment(config, api.db.pool);
    const nativeConnection = await NativeConnection.connect({ address: temporal.address });
    const w = await Worker.create({
      connection: nativeConnection,
      taskQueue: config.temporalTaskQueue,
      workflowBundle: await workflowBundle(),
      activities: createActivities({ config, pool: api.db.pool }),
    });
    worker = { worker: w, running: w.run(), connection: nativeConnection };
  };
  const stopWorker = async () => {
    if (!worker) return;
    worker.worker.shutdown();
    await worker.running;
    await worker.connection.close();
    worker = undefined;
  };
  if (options.inProcessWorker !== false) await startWorker();
  return {
    api,
    config,
    temporal,
    client,
    root: new ApiClient(api.rootUrl, api.root),
    bridge,
    relay,
    startWorker,
    stopWorker,
    async stop() {
      await stopWorker();
      await bridge?.stop();
      await relay?.stop();
      // the bridge queue is durable: without this every test file would leave one behind on the broker
      const amqpConnection = await connectBus(config.amqpUrl);
      const cleanup = await amqpConnection.createChannel();
      await cleanup.deleteQueue(bridgeQueueName(config));
      await cleanup.deleteQueue(bridgeDeadLetterName(config));
      await cleanup.deleteExchange(bridgeDeadLetterName(config));
      await cleanup.deleteExchange(deploymentMarkerName(config));
      await amqpConnection.close();
      // a given Temporal server outlives the stack: its claim on the task queue goes (a dev server goes whole)
      if (options.temporalAddress) await releaseTaskQueue(client, config, await deploymentIdOf(api.db.pool));
      await connection.close();
      await api.close();
      await temporal.stop();
    },
  };
}

/** The environment a `tgs` process needs to join the stack: its database, broker, Temporal, task queue and exchange prefix. */
export function stackEnv(stack: Pick<Stack, 'config'>): Record<string, string> {
  const c = stack.config;
  return {
    DATABASE_URL: c.databaseUrl,
    AMQP_URL: c.amqpUrl,
    TEMPORAL_ADDRESS: c.temporalAddress,
    TGS_TASK_QUEUE: c.temporalTaskQueue,
    TGS_EXCHANGE_PREFIX: c.exchangePrefix,
  };
}

/** Polls until fn returns a truthy value (or throws after timeoutMs, saying what it waited for). */
export async function eventually<T>(fn: () => Promise<T | undefined | false>, what: string, timeoutMs = 30_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const value = await fn();
      if (value) return value;
    } catch (err) {
      last = err;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}${last ? `: ${(last as Error).message}` : ''}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}
