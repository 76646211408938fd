import type pg from 'pg';
import type { Config } from '../config.js';
import type { ClientStore } from '../auth/authenticate.js';
import type { Issuer } from '../auth/issuer.js';
import type { LazyTemporalClient } from '../temporal/connection.js';
import type { RoleCache } from '../auth/roleStore.js';

/**
 * What endpoint handlers may use. Built once per API process (src/processes/api.ts) and passed
 * explicitly to every handler as ctx.deps. The framework declares what every service uses; a service adds its own
 * members by declaration merging (`declare module '../api/deps.js'`, as src/queue/apiDeps.ts does), so the framework
 * never names a service's classes.
 */
export interface ApiDeps {
  config: Config;
  pool: pg.Pool;
  clients: ClientStore;
  /** Signs the temporary credentials claimWork returns and artifact URLs (`issuer.current`, kept fresh). */
  issuer: Issuer;
  /** The scheduler API starts, signals and updates graph workflows through it. */
  temporal: LazyTemporalClient;
  /** The roles every request's scopes are expanded with. */
  roles: RoleCache;
}
