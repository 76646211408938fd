import type { FastifyInstance } from 'fastify';
import type { Config } from '../config.js';
import { createPool } from '../db/pool.js';
import { ensureDatabase, migrate } from '../db/migrate.js';
import { createClientStore, ensureIssuerClient } from '../auth/clients.js';
import { queueEndpoints } from '../queue/api/index.js';
import { artifactEndpoints } from '../queue/api/artifacts/index.js';
import { authEndpoints } from '../auth/api/index.js';
import { schedulerEndpoints } from '../scheduler/api/index.js';
import type { ApiDeps } from './deps.js';
import { LazyTemporalClient } from '../temporal/connection.js';
import { ClaimWaiter } from '../queue/claimWaiter.js';
import { startSweeps } from '../queue/sweeps.js';
import { GroupAnnouncer } from '../queue/groupAnnouncer.js';
import { createApiServer, type ApiServerOptions } from './server.js';
import { registerUi } from './ui.js';

export interface ApiApp {
  app: FastifyInstance;
  deps: ApiDeps;
  /** Starts listening on config.host:config.port; returns the bound address. */
  listen(): Promise<string>;
  close(): Promise<void>;
}

/** Builds the API process: pool, migrations (under an advisory lock), issuer client, routes. */
export async function buildApi(config: Config, options: ApiServerOptions = {}): Promise<ApiApp> {
  await ensureDatabase(config.databaseUrl);
  const pool = createPool(config.databaseUrl, 20);
  await migrate(pool);
  const issuer = await ensureIssuerClient(pool);
  const temporal = new LazyTemporalClient(config);
  const claimWaiter = new ClaimWaiter(config.databaseUrl);
  await claimWaiter.start();
  const groupAnnouncer = new GroupAnnouncer(pool, config);
  const deps: ApiDeps = { config, pool, clients: createClientStore(pool, config.rootAccessToken), issuer, temporal, claimWaiter, groupAnnouncer };
  const sweeps = startSweeps(pool, config);
  const app = createApiServer(deps, [...queueEndpoints, ...artifactEndpoints, ...authEndpoints, ...schedulerEndpoints], options);
  registerUi(app, config);
  return {
    app,
    deps,
    async listen() {
      return app.listen({ port: config.port, host: config.host });
    },
    async close() {
      // Stopping the waiter answers every long-polling claimWork at once. A connection whose request is
      // answered while closing would then stay open for node's keep-alive (~72 s) and server.close() would
      // wait for it: close connections as they become idle, and whatever is left after a grace period.
      await claimWaiter.stop();
      await sweeps.stop();
      const idle = setInterval(() => app.server.closeIdleConnections(), 100);
      const force = setTimeout(() => app.server.closeAllConnections(), 5000);
      try {
        await app.close();
      } finally {
        clearInterval(idle);
        clearTimeout(force);
      }
      await groupAnnouncer.stop();
      await temporal.close();
      await pool.end();
    },
  };
}
