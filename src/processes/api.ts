import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';
import { createPool } from '../db/pool.js';
import { ensureDatabase, migrate } from '../db/migrate.js';
import { deploymentIdOf } from '../db/deployment.js';
import { warnWithoutAutovacuum } from '../db/autovacuum.js';
import { isPgliteUrl } from '../db/pglite.js';
import { createClientStore } from '../auth/clients.js';
import { Issuer } from '../auth/issuer.js';
import { queueEndpoints } from '../queue/api/index.js';
import { artifactEndpoints } from '../queue/api/artifacts/index.js';
import { authEndpoints } from '../authService/api/index.js';
import { schedulerEndpoints } from '../scheduler/api/index.js';
import { indexEndpoints } from '../indexService/api/index.js';
import { expireIndex } from '../indexService/store.js';
import { hooksEndpoints } from '../hooks/api/index.js';
import { hookScheduleSweep } from '../hooks/reconcileSweep.js';
import { lastFiresSweep } from '../hooks/lastFiresSweep.js';
import type { ApiDeps } from '../api/deps.js';
import '../queue/apiDeps.js'; // the queue's members of ApiDeps
import type { Endpoint } from '../api/endpoint.js';
import { LazyTemporalClient } from '../temporal/connection.js';
import { ClaimWaiter } from '../queue/claimWaiter.js';
import { stallSweep } from '../queue/stalls.js';
import { startSweeps } from '../queue/sweeps.js';
import { startMissingWorkflows } from '../scheduler/missingWorkflows.js';
import { closedWorkflowSweep } from '../scheduler/closedWorkflows.js';
import { graphTaskGroups } from '../scheduler/graphGroup.js';
import { GroupAnnouncer } from '../queue/groupAnnouncer.js';
import { WorkerRecorder } from '../queue/workers.js';
import { WorkerStreams } from '../queue/workerStream/streams.js';
import { expandingClientStore, RoleCache } from '../auth/roleStore.js';
import { createApiServer, type ApiServerOptions } from '../api/server.js';
import { registerUi } from '../api/ui.js';
import { registerHttpMetrics } from '../api/httpMetrics.js';
import { observeQueueDatabase } from '../observability/metrics.js';
import { gracefulStopper } from '../api/gracefulStop.js';

/**
 * Every endpoint the API serves, in OpenAPI order. The authorization matrix test (test/security) walks
 * this list, so an endpoint added here is checked for its scopes without editing the test.
 */
export const apiEndpoints: Endpoint[] = [...queueEndpoints, ...artifactEndpoints, ...authEndpoints, ...schedulerEndpoints, ...indexEndpoints, ...hooksEndpoints];

export interface ApiApp {
  app: FastifyInstance;
  deps: ApiDeps;
  /** Starts listening on config.host:config.port; returns the bound address. */
  listen(): Promise<string>;
  close(): Promise<void>;
}

/** Builds the API process: pool, migrations (under an advisory lock), issuer client, routes. */
export async function buildApi(config: Config, options: ApiServerOptions & { log?: (line: string) => void } = {}): Promise<ApiApp> {
  const log = options.logger;
  const logLine = options.log ?? ((line: string) => (log ? log.warn(line) : console.error(line)));
  const infoLine = log ? (line: string) => log.info(line) : undefined;
  await ensureDatabase(config.databaseUrl, infoLine);
  const pool = createPool(config.databaseUrl, 20);
  await migrate(pool, infoLine);
  // read once now: graph workflows carry it (src/scheduler/startWorkflow.ts), started from code that may hold the
  // pool's one session (PGlite) when it asks
  await deploymentIdOf(pool);
  // In the process log (tests' in-process APIs have none); the embedded database (tgs dev) has no autovacuum worker
  // and needs none: it holds a developer's few tasks.
  if (log && !isPgliteUrl(config.databaseUrl)) await warnWithoutAutovacuum(pool, (line) => log.warn(line));
  const issuer = await Issuer.start(pool, logLine);
  const temporal = new LazyTemporalClient(config);
  const claimWaiter = new ClaimWaiter(config.databaseUrl, undefined, logLine);
  await claimWaiter.start();
  const groupAnnouncer = new GroupAnnouncer(pool, config, undefined, logLine);
  const roles = new RoleCache(pool, config.databaseUrl);
  await roles.start();
  const workers = new WorkerRecorder(pool);
  workers.start();
  const clients = expandingClientStore(createClientStore(pool, config.rootAccessToken, issuer), roles);
  const workerStreams = new WorkerStreams(logLine);
  const taskGroups = graphTaskGroups(temporal);
  const deps: ApiDeps = { config, pool, clients, issuer, temporal, claimWaiter, groupAnnouncer, roles, workers, workerStreams, taskGroups };
  const sweeps = startSweeps(pool, config, logLine, [
    ['missing workflows', () => startMissingWorkflows(pool, config, temporal)],
    ['closed workflows', closedWorkflowSweep(pool, temporal)],
    ['index expiry', () => expireIndex(pool)],
    ['stalled tasks', stallSweep(pool, config, () => workers.flush())],
    ['hook schedules', hookScheduleSweep(pool, config, temporal, infoLine ?? logLine)],
    ['hook last fires', lastFiresSweep(pool, config)],
  ]);
  const app = createApiServer(deps, apiEndpoints, options);
  registerHttpMetrics(app, apiEndpoints, options.logger);
  const unobserve = observeQueueDatabase(config.databaseUrl, pool);
  registerUi(app, config);
  const stopper = gracefulStopper(app.server);
  return {
    app,
    deps,
    async listen() {
      return app.listen({ port: config.port, host: config.host });
    },
    async close() {
      // Stopping the waiter answers every long-polling claimWork at once (with what it claimed, if anything), and
      // every worker stream drains (its resolves answered, its worker told to go elsewhere); the stopper lets every
      // request in flight finish and closes each connection without cutting one.
      unobserve();
      await stopper.stop(() => Promise.all([claimWaiter.stop(), workerStreams.stop()]).then(() => undefined));
      await app.close();
      await sweeps.stop();
      await groupAnnouncer.stop();
      await workers.stop();
      await roles.stop();
      issuer.stop();
      await temporal.close();
      await pool.end();
    },
  };
}
