import { createHash } from 'node:crypto';
import pg from 'pg';
import { createPglitePool, isPgliteUrl, openPgliteSession, type PgliteSession } from './pglite.js';
import { logger } from '../log.js';
import { postgresTimeoutsFromEnv } from '../config.js';

/** Anything that can run a query: a pool or a client inside a transaction. */
export type Queryable = Pick<pg.Pool, 'query'> | pg.PoolClient;

// timestamptz and bigint arrive as strings/Dates; we keep Dates for timestamptz (pg default)
// and parse int8 (counts) as numbers: no count here comes near 2^53.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

/**
 * A pg.Pool on DATABASE_URL; a `pglite:` URL gives the embedded database's shared pool (src/db/pglite.ts).
 * `genericPlans`: the pool's sessions plan every parameterized statement once, without its values
 * (`plan_cache_mode = force_generic_plan`), for a process whose every statement is a named one whose generic plan
 * was checked (the relay's). Postgres otherwise plans a named statement again at each call whenever a plan for the
 * call's values looks cheaper, and it did for the relay's cursor read at every call: 0.24 ms planning a read against
 * 0.22 ms executing it.
 * `indexScansOnly`: the sessions never choose a sequential scan where an index serves (`enable_seqscan = off`),
 * for a process whose every statement reads a few rows of a queue table by its index (the relay's outbox). Such a
 * table is near empty whenever autovacuum analyzes it, and a plan made then is a sequential scan, which a backlog
 * turns into a read of the whole table at every call: 5.3 ms and 8,306 buffers for a relay read of 2 rows from an
 * outbox of 4,153 pages, measured after an ANALYZE of the empty outbox.
 */
export function createPool(databaseUrl: string, max = 10, options: { genericPlans?: boolean; indexScansOnly?: boolean } = {}): pg.Pool {
  if (isPgliteUrl(databaseUrl)) return createPglitePool(databaseUrl);
  // JIT off for tgs' sessions: every statement here is short, and Postgres JIT-compiles any plan whose estimated
  // cost passes jit_above_cost, which stale statistics (a graph of 10,000 tasks stored a moment ago) make common:
  // the dispatch's readiness check took 255 ms a call, 120 ms of it compiling, against 12 ms without JIT.
  // An `options` in DATABASE_URL replaces this one. TGS_PG_STATEMENT_TIMEOUT_MS / TGS_PG_IDLE_IN_TRANSACTION_TIMEOUT_MS
  // add Postgres' timeouts (docs/deployments.md, "Pool and timeouts"); migrations lift the statement timeout.
  const sessionOptions = `-c jit=off${options.genericPlans ? ' -c plan_cache_mode=force_generic_plan' : ''}${options.indexScansOnly ? ' -c enable_seqscan=off' : ''}${postgresTimeoutsFromEnv()}`;
  const pool = new pg.Pool({ connectionString: databaseUrl, max, options: sessionOptions });
  // An idle client that loses its connection must not crash the process.
  pool.on('error', (err) => logger('db').error({ err: err.message }, 'postgres pool error'));
  // pg-pool listens for 'error' only on idle clients. A client checked out (withTransaction, a query in
  // flight, any pool.connect() holder) when the server ends its connection (a Postgres restart, a
  // pg_terminate_backend) emits 'error' with no listener: an uncaught exception that kills the process.
  // This listener lives as long as the client: the operation in progress fails with the error, and pg-pool
  // drops the dead client when it is released.
  pool.on('connect', (client) => client.on('error', (err) => logger('db').warn({ err: err.message }, 'postgres connection lost')));
  return pool;
}

const statementNames = new Map<string, string>();

/**
 * A named statement: Postgres parses and plans it once per connection, not on every call. Planning was 47%
 * of Postgres' statement time on the queue's hot path (pg_stat_statements, queue bench: 13.0 s planning vs
 * 14.9 s executing). For static texts only: each distinct text becomes a statement on every connection.
 * The name is derived from the text, so two call sites with one text share it.
 */
export function prepared(text: string, values: unknown[]): pg.QueryConfig {
  let name = statementNames.get(text);
  if (name === undefined) {
    name = `tgs_${createHash('sha256').update(text).digest('hex').slice(0, 24)}`;
    statementNames.set(text, name);
  }
  return { name, text, values };
}

/**
 * `ANY(...)` over an array parameter, for named statements (`prepared`) the hot path calls with a few elements at a
 * time. Postgres plans a named statement for the call's values while that plan looks cheaper than the generic one,
 * and `x = ANY($1)` looks cheaper for 4 elements than for the 10 the generic plan assumes: such a statement was
 * planned at every call (0.1-0.3 ms, as long as executing it). Read through a sub-select, the array's length is
 * unknown to both plans alike, so Postgres keeps the generic plan after its fifth call. The plan is otherwise the
 * same (an index scan driven by the array).
 */
export const anyOf = (param: string, type: string) => `ANY(ARRAY(SELECT unnest(${param}::${type}[])))`;

/** A dedicated connection for LISTEN and session-level advisory locks (what a pg.Client offers them). */
export type DbSession = PgliteSession;

/** Opens a DbSession: a connected pg.Client, or on PGlite a view of its one shared session. */
export async function connectSession(databaseUrl: string): Promise<DbSession> {
  if (isPgliteUrl(databaseUrl)) return openPgliteSession(databaseUrl);
  const client = new pg.Client({ connectionString: databaseUrl });
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => undefined);
    throw err;
  }
  return client;
}

const PENDING_NOTIFICATIONS = Symbol('pendingNotifications');
type NotifyingClient = pg.PoolClient & { [PENDING_NOTIFICATIONS]?: Set<string> };

const quote = (value: string) => `'${value.replace(/'/g, "''")}'`;

/**
 * pg_notify for after the surrounding transaction commits. A NOTIFY inside a transaction holds Postgres'
 * global notify lock from commit start through the WAL flush, so every notifying transaction commits one
 * at a time (seen here: 16 claimers queued on `Lock:object` at COMMIT). Sent right after COMMIT instead,
 * it costs no extra round trip. A notification lost to a crash in between is covered by the listeners'
 * polling backstops (relay 1 s, claimWork 1 s). Outside a transaction it is sent at once.
 */
export async function notifyAfterCommit(db: Queryable, channel: string, payloads: Iterable<string>): Promise<void> {
  const pending = (db as NotifyingClient)[PENDING_NOTIFICATIONS];
  const statements = [...new Set(payloads)].map((p) => `SELECT pg_notify(${quote(channel)}, ${quote(p)})`);
  if (statements.length === 0) return;
  if (pending) {
    for (const statement of statements) pending.add(statement);
    return;
  }
  await db.query(statements.join('; '));
}

interface CoalescedNotify {
  inFlight: boolean;
  again: boolean;
}
const coalesced = new WeakMap<object, Map<string, CoalescedNotify>>();

/**
 * pg_notify for work already committed by a single statement, off the caller's path and coalesced: while
 * one notification for (channel, payload) is in flight, further ones become a single follow-up. Under load
 * this sends about one notification per round trip instead of one per commit; when idle it goes out at
 * once. A failure is ignored: the listeners' polling backstops (relay 1 s, claimWork 1 s) cover it.
 */
export function notifySoon(pool: Pick<pg.Pool, 'query'>, channel: string, payload: string): void {
  let byKey = coalesced.get(pool);
  if (!byKey) {
    byKey = new Map();
    coalesced.set(pool, byKey);
  }
  const key = `${channel}\n${payload}`;
  const entry = byKey.get(key) ?? { inFlight: false, again: false };
  byKey.set(key, entry);
  if (entry.inFlight) {
    entry.again = true;
    return;
  }
  entry.inFlight = true;
  const send = (): void => {
    entry.again = false;
    let sent: Promise<unknown>;
    try {
      sent = pool.query(prepared('SELECT pg_notify($1, $2)', [channel, payload]));
    } catch {
      // a pool that has ended (shutdown): nobody is listening through it any more
      entry.inFlight = false;
      return;
    }
    sent.then(
      () => (entry.again ? send() : void (entry.inFlight = false)),
      () => void (entry.inFlight = false),
    );
  };
  send();
}

/** Runs fn in a transaction; commits on success (then sends its notifications), rolls back and rethrows on error. */
export async function withTransaction<T>(pool: pg.Pool, fn: (client: pg.PoolClient) => Promise<T>): Promise<T> {
  const client = (await pool.connect()) as NotifyingClient;
  const pending = new Set<string>();
  client[PENDING_NOTIFICATIONS] = pending;
  try {
    await client.query('BEGIN');
    const result = await fn(client);
    delete client[PENDING_NOTIFICATIONS];
    // COMMIT and the notifications in one simple-protocol round trip; an error in COMMIT skips the rest.
    await client.query(['COMMIT', ...pending].join('; '));
    return result;
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    throw err;
  } finally {
    delete client[PENDING_NOTIFICATIONS];
    client.release();
  }
}

/** A data-modifying statement for another's WITH, its parameters numbered from the `$n` it was asked to start at. */
export interface StatementPart {
  sql: string;
  params: unknown[];
}
