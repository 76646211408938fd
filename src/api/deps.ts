import type pg from 'pg';
import type { Config } from '../config.js';
import type { ClientStore } from '../auth/authenticate.js';
import type { Issuer } from '../auth/issuer.js';
import type { LazyTemporalClient } from '../temporal/connection.js';
import type { ClaimWaiter } from '../queue/claimWaiter.js';
import type { GroupAnnouncer } from '../queue/groupAnnouncer.js';
import type { RoleCache } from '../auth/roleStore.js';
import type { WorkerRecorder } from '../queue/workers.js';
import type { WorkerStreams } from '../queue/workerStream/streams.js';

/**
 * What endpoint handlers may use. Built once per API process (src/api/server.ts) and passed
 * explicitly to every handler as ctx.deps.
 */
export interface ApiDeps {
  config: Config;
  pool: pg.Pool;
  clients: ClientStore;
  /** Signs the temporary credentials claimWork returns and artifact URLs (`issuer.current`, kept fresh). */
  issuer: Issuer;
  /** The scheduler API starts, signals and updates graph workflows through it. */
  temporal: LazyTemporalClient;
  /** Wakes long-polling claimWork callers on LISTEN/NOTIFY. */
  claimWaiter: ClaimWaiter;
  /** Announces task groups whose last task a report resolved. */
  groupAnnouncer: GroupAnnouncer;
  /** The roles every request's scopes are expanded with. */
  roles: RoleCache;
  /** Records the task queues and workers claimWork sees, in batches. */
  workers: WorkerRecorder;
  /** The worker streams open on this process (src/queue/workerStream/). */
  workerStreams: WorkerStreams;
}
