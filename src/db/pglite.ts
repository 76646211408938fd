import path from 'node:path';
import pg from 'pg';
import { PGlite } from '@electric-sql/pglite';
import { PglitePgConnection } from '@electric-sql/pglite/node-postgres';
import { acquireDirLock, type DirLock } from './pgliteLock.js';
import { logger } from '../log.js';

/**
 * Embedded Postgres for `tgs dev` without DATABASE_URL: PGlite (Postgres compiled to WebAssembly, in
 * this process) behind a real `pg.Pool`, so every query, transaction, advisory lock and `FOR UPDATE SKIP
 * LOCKED` of the Postgres code runs unchanged and results are parsed by pg exactly as from a server.
 *
 * PGlite is ONE session. The pool therefore holds exactly one client: a transaction keeps it until
 * COMMIT/ROLLBACK and every other caller queues behind it (pg.Pool's FIFO), so two transactions never
 * interleave. Waiting callers hold nothing: claimWork long-polls on notifications delivered by PGlite's
 * notification callback (see openPgliteSession), not on a connection. Every createPool() of the same data
 * directory in a process shares that one pool and PGlite instance; the last end() closes them. A data
 * directory is locked against other processes (`<dir>.lock`).
 *
 * Limits (dev use only): one process; throughput is that of one session on the event loop; a caller
 * that takes a second client while holding one (nested transactions on two connections) would wait
 * forever — tgs never does.
 */

export const PGLITE_SCHEME = 'pglite:';

/** `pglite:///abs/dir` (a directory, kept across restarts) or `pglite://memory` (gone at exit). */
export function isPgliteUrl(databaseUrl: string): boolean {
  return databaseUrl.startsWith(PGLITE_SCHEME);
}

export function pgliteUrl(dataDir: string): string {
  return `${PGLITE_SCHEME}//${path.resolve(dataDir)}`;
}

/** The data directory of a pglite URL, or undefined for an in-memory database. */
export function pgliteDataDir(databaseUrl: string): string | undefined {
  const rest = databaseUrl.slice(PGLITE_SCHEME.length).replace(/^\/\//, '');
  if (rest === 'memory' || rest === '' || rest.startsWith('memory/')) return undefined;
  return path.resolve(decodeURIComponent(rest));
}

interface Instance {
  key: string;
  db: PGlite;
  pool: pg.Pool;
  lock: DirLock | undefined;
  refs: number;
  notificationListeners: Set<(channel: string, payload: string) => void>;
  closing: Promise<void> | undefined;
}

const instances = new Map<string, Instance>();

function openInstance(databaseUrl: string): Instance {
  const dataDir = pgliteDataDir(databaseUrl);
  const key = dataDir ?? databaseUrl;
  const existing = instances.get(key);
  if (existing && !existing.closing) return existing;
  if (existing?.closing) {
    throw new Error(`the embedded database ${key} is still closing; open it again after its pools have ended`);
  }
  const lock = dataDir ? acquireDirLock(`${dataDir}.lock`, `the embedded database ${dataDir}`) : undefined;
  let db: PGlite;
  try {
    // int8 as Number is set globally on pg's parsers (src/db/pool.ts); PGlite's own parsers are unused.
    db = new PGlite(dataDir ? { dataDir } : {});
  } catch (err) {
    lock?.release();
    throw err;
  }
  // Every connection's protocol messages go through one chain: PGlite handles one message at a time
  // and keeps per-query state, so two connections (an ended one and its replacement) must never overlap.
  let chain: Promise<unknown> = Promise.resolve();
  const serialized = {
    waitReady: db.waitReady,
    execProtocolStream: (message: Uint8Array, options?: Parameters<PGlite['execProtocolStream']>[1]) => {
      const run = chain.then(() => db.execProtocolStream(message, options));
      chain = run.catch(() => undefined);
      return run;
    },
  };
  class PgliteClient extends pg.Client {
    constructor(config: pg.ClientConfig) {
      super({ ...config, connection: new PglitePgConnection({ pglite: serialized as unknown as PGlite }) } as pg.ClientConfig);
      // Named statements (src/db/pool.ts prepared) would outlive this client in the one shared session, and
      // its replacement's Parse of the same name would fail: run them unnamed here.
      const query = this.query.bind(this) as (...args: unknown[]) => unknown;
      (this as unknown as { query: (...args: unknown[]) => unknown }).query = (config: unknown, ...rest: unknown[]) => {
        const unnamed =
          typeof config === 'object' && config !== null && 'name' in config && typeof (config as { submit?: unknown }).submit !== 'function'
            ? { ...(config as object), name: undefined }
            : config;
        return query(unnamed, ...rest);
      };
    }
  }
  const pool = new pg.Pool({
    Client: PgliteClient as unknown as new () => pg.ClientBase,
    max: 1,
    idleTimeoutMillis: 0,
    // A client dropped with a transaction open (a bug, or an error mid-query) must not leave the shared
    // session inside it for the next caller.
    onConnect: async (client: pg.ClientBase) => {
      if (db.isInTransaction()) await client.query('ROLLBACK');
    },
  } as pg.PoolConfig);
  pool.on('error', (err) => logger('db').error({ err: err.message }, 'embedded database (PGlite) error'));
  const instance: Instance = { key, db, pool, lock, refs: 0, notificationListeners: new Set(), closing: undefined };
  db.onNotification((channel, payload) => {
    for (const listener of instance.notificationListeners) listener(channel, payload);
  });
  instances.set(key, instance);
  return instance;
}

async function releaseInstance(instance: Instance): Promise<void> {
  instance.refs--;
  if (instance.refs > 0) return;
  instance.closing ??= (async () => {
    try {
      await instance.pool.end();
      await instance.db.close();
    } finally {
      instance.lock?.release();
      instances.delete(instance.key);
    }
  })();
  await instance.closing;
}

/**
 * A pg.Pool for a pglite URL: a handle on the process-wide pool of that database. `end()` releases the
 * handle; the database closes when the last handle is released.
 */
export function createPglitePool(databaseUrl: string): pg.Pool {
  const instance = openInstance(databaseUrl);
  instance.refs++;
  const { pool } = instance;
  let ended = false;
  const handle = {
    query: pool.query.bind(pool),
    connect: pool.connect.bind(pool),
    on: (event: string, listener: (...args: unknown[]) => void) => {
      pool.on(event as 'error', listener);
      return handle;
    },
    async end() {
      if (ended) return;
      ended = true;
      await releaseInstance(instance);
    },
    get totalCount() {
      return pool.totalCount;
    },
    get idleCount() {
      return pool.idleCount;
    },
    get waitingCount() {
      return pool.waitingCount;
    },
    get ended() {
      return ended;
    },
  };
  return handle as unknown as pg.Pool;
}

/**
 * What LISTEN users (claimWork's waiter, the relay) need from a dedicated connection; a pg.Client on
 * Postgres. On PGlite, the shared session: queries go through the pool, notifications of the channels
 * this session LISTENed to are handed over from PGlite's notification callback.
 */
export interface PgliteSession {
  query<R extends pg.QueryResultRow = any>(text: string, values?: unknown[]): Promise<pg.QueryResult<R>>;
  on(event: 'notification', listener: (message: pg.Notification) => void): this;
  on(event: 'error' | 'end', listener: (err?: Error) => void): this;
  removeAllListeners(): this;
  end(): Promise<void>;
}

export function openPgliteSession(databaseUrl: string): PgliteSession {
  const pool = createPglitePool(databaseUrl);
  const instance = instances.get(pgliteDataDir(databaseUrl) ?? databaseUrl) as Instance;
  const channels = new Set<string>();
  let notificationListeners: ((message: pg.Notification) => void)[] = [];
  const forward = (channel: string, payload: string) => {
    if (!channels.has(channel)) return;
    for (const l of notificationListeners) l({ processId: 0, channel, payload });
  };
  instance.notificationListeners.add(forward);
  let ended = false;
  const session: PgliteSession = {
    async query(text: string, values?: unknown[]) {
      if (ended) throw new Error('the embedded database session has ended');
      const result = await pool.query(text, values);
      // LISTEN is session-wide on PGlite: remember which channels this caller asked for.
      const listen = /^\s*(UN)?LISTEN\s+"?([\w$]+)"?\s*;?\s*$/i.exec(text);
      if (listen) {
        if (listen[1]) channels.delete(listen[2].toLowerCase());
        else channels.add(listen[2].toLowerCase());
      }
      return result;
    },
    on(event: string, listener: (arg?: any) => void) {
      if (event === 'notification') notificationListeners.push(listener);
      return session;
    },
    removeAllListeners() {
      notificationListeners = [];
      return session;
    },
    async end() {
      if (ended) return;
      ended = true;
      instance.notificationListeners.delete(forward);
      await pool.end();
    },
  } as PgliteSession;
  return session;
}
