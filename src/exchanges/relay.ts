import type pg from 'pg';
import type { Config } from '../config.js';
import { connectSession, createPool, prepared, type DbSession } from '../db/pool.js';
import { sendTogether, type BusConfirmChannel, type BusConnection } from './bus.js';
import { BusReconnect } from './busReconnect.js';
import { declareExchanges } from './declare.js';
import { DEFERRED_CHANNEL, OUTBOX_CHANNEL, UNPUBLISHED_COUNT } from './outbox.js';
import { MAX_GAPS, OutboxCursor, type OutboxReadPlan } from './outboxCursor.js';
import type { QueueExchange } from './exchanges.js';
import { taskMessage } from '../queue/messages.js';
import { OutageLog } from '../outageLog.js';
import type { TaskRow } from '../queue/taskRow.js';
import { completedExchange, completionToIndex, OUTBOX_DELETE_INDEXING } from '../indexService/completions.js';

// Only one relay publishes at a time, so messages leave in outbox id order, but for a row whose transaction committed
// after a higher id's row was read (it follows in a later batch); per task order is kept (src/exchanges/outboxCursor.ts).
// The deferred lane (a graph's task-defined messages, migration 021) goes out a batch between the outbox's batches, and
// a task's deferred message ahead of the first outbox batch that holds another message of that task (readAnswer).
const RELAY_LOCK = 7_471_020_232;
const BATCH = 500;
/**
 * Under load, fewer and larger batches: after a batch of LOADED_BATCH rows or more (and fewer than BATCH: a full
 * batch means a backlog, read at once) the next read starts LOADED_SPACING_MS after this one did. Every batch costs
 * a lock-session round trip, a read, a confirm wait and a delete whatever its size; a chain's messages (a batch of
 * one or two) are read the moment their NOTIFY comes, so a dependency hop does not wait for it. Claim + complete one
 * task a call (~10 messages a batch before): relay 0.34-0.36 → 0.23-0.26 ms of CPU a task, RabbitMQ 0.43-0.46 →
 * 0.32-0.35; hop p50 unchanged (23.8-25.8 ms either way).
 */
const LOADED_BATCH = 16;
const LOADED_SPACING_MS = 20;
/** After its lock session failed, how long a relay waits before taking the lock again: standbys try every 1 s. */
const STEP_DOWN_MS = 2500;

export interface RelayStats {
  published: number;
  batches: number;
  reconnects: number;
  /** successful AMQP connections (more than one: the relay lost and re-established its connection) */
  connections: number;
  active: boolean;
  /** ranges of outbox ids below the read cursor still watched for a late commit (src/exchanges/outboxCursor.ts) */
  gaps: number;
  /** times the gaps outgrew their bound and the relay started over with a full read */
  gapOverflows: number;
  /** reads after a loaded batch, started LOADED_SPACING_MS after its read at the soonest */
  spacedReads: number;
}

export interface OutboxRow {
  id: number;
  message_id: string;
  exchange: string;
  routing_key: string;
  cc: string[];
  payload: unknown;
  render: QueueExchange | null;
  /** A row of the deferred lane (outbox_deferred): its id is the lane's own, not an outbox id. */
  deferred?: boolean;
}

/** The outbox's columns as OutboxRow has them. */
export const OUTBOX_COLUMNS = 'id, message_id, exchange, routing_key, cc, payload, render';
/** The deferred lane's rows as OutboxRow's columns (they are all rendered: no exchange, key or cc of their own). */
export const DEFERRED_COLUMNS = `id, message_id, '' AS exchange, '' AS routing_key, '{}'::text[] AS cc, payload, render`;

/**
 * The first row of every read's answer (its id is NULL): what the read's snapshot saw, for the cursor
 * (src/exchanges/outboxCursor.ts). One statement, so the same snapshot as the rows. `next_xid` is the next
 * xid Postgres would assign: age(x) counts from it, so xmax + age(xmax) is it (as a 64-bit xid; the snapshot's
 * own xmax is only one past the latest completed xid). `last_taken`: the highest id the sequence handed out.
 */
const READ_HEADER = `SELECT NULL::bigint AS id, NULL::text AS message_id, NULL::text AS exchange, NULL::text AS routing_key,
         NULL::text[] AS cc, NULL::jsonb AS payload, NULL::text AS render,
         pg_snapshot_xmin(s)::text AS xmin,
         (pg_snapshot_xmax(s)::text::bigint + age(pg_snapshot_xmax(s)::xid))::text AS next_xid,
         (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM outbox_id_seq) AS last_taken,
         NULL::boolean AS deferred
    FROM pg_current_snapshot() AS s`;

/**
 * A read's answer: the header, the outbox rows `r` read, and the deferred lane's rows of the tasks those rows are
 * about (migration 021), all in one snapshot. A task's deferred message (its task-defined) committed before any
 * other message of the task could be written (nothing else can name the task until its graph's transaction has
 * committed), so a read that sees a later message of a task sees its deferred one too, and the relay publishes it
 * first. The task is `status.taskId` of a message as written, `row.task_id` of a row written for rendering.
 */
const readAnswer = (rows: string) => `WITH r AS MATERIALIZED (${rows})
  ${READ_HEADER}
  UNION ALL SELECT ${OUTBOX_COLUMNS}, NULL, NULL, NULL, false FROM r
  UNION ALL SELECT ${DEFERRED_COLUMNS}, NULL, NULL, NULL, true FROM outbox_deferred
    WHERE task_id IN (SELECT COALESCE(r.payload->'row'->>'task_id', r.payload->'status'->>'taskId') FROM r)`;

/** The first BATCH rows by id (the read after a reset, or every read if the cursor cannot be used). */
const FULL_READ = readAnswer(`SELECT ${OUTBOX_COLUMNS} FROM outbox ORDER BY id LIMIT ${BATCH}`);

/**
 * The lowest BATCH rows among the cursor's window ($1, $2] and the gaps [$3[i], $4[i]]. EXPLAIN (Postgres 15,
 * generic plan; an outbox of 300,000 ids, all but the last 1,000 deleted, 3 gaps): a Merge Append of an index
 * scan from the cursor and a nested loop of one index probe per gap, 500 rows in 0.9 ms and 22 buffers, where
 * FULL_READ took 4.7 ms and 3,704 buffers. A read touches no more than the window's and the gaps' ids whatever
 * plan is chosen, so a named statement is safe: a generic plan of `id > $1` without the window's end scanned
 * all 100,600 rows above the cursor and sorted them (178 ms).
 */
export const CURSOR_READ = readAnswer(`SELECT ${OUTBOX_COLUMNS} FROM (
      (SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE id > $1 AND id <= $2 ORDER BY id LIMIT ${BATCH})
      UNION ALL
      (SELECT o.* FROM unnest($3::bigint[], $4::bigint[]) AS gap(lo, hi)
         CROSS JOIN LATERAL (SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE id BETWEEN gap.lo AND gap.hi ORDER BY id LIMIT ${BATCH}) o)
      ORDER BY id LIMIT ${BATCH}) w`);

/** The deferred lane's first BATCH rows, published between the outbox's batches. */
const DEFERRED_READ = `SELECT ${DEFERRED_COLUMNS}, true AS deferred FROM outbox_deferred ORDER BY id LIMIT ${BATCH}`;

/** Deletes the outbox rows $1 and the deferred lane's rows $2 (published and confirmed). */
export const OUTBOX_DELETE = 'WITH d AS (DELETE FROM outbox_deferred WHERE id = ANY($2)) DELETE FROM outbox WHERE id = ANY($1)';

/** The outbox sequence's cache: the cursor needs ids handed out in increasing order over time (CACHE 1). */
const SEQUENCE_CACHE = `SELECT seqcache AS cache FROM pg_sequence WHERE seqrelid = 'outbox_id_seq'::regclass`;

interface ReadHeader {
  xmin: string;
  next_xid: string;
  last_taken: number;
}

/** The message an outbox row stands for: as written, or rendered from the task row snapshot it holds. */
export function outboxMessage(config: Config, row: OutboxRow): { exchange: string; routingKey: string; cc: string[]; payload: unknown; messageId: string } {
  if (row.render === null) return { exchange: row.exchange, routingKey: row.routing_key, cc: row.cc, payload: row.payload, messageId: row.message_id };
  const { row: snapshot, runId } = row.payload as { row: TaskRow & { deadline: string; expires: string; taken_until: string | null }; runId: number };
  const taskRow: TaskRow = {
    ...snapshot,
    deadline: new Date(snapshot.deadline),
    expires: new Date(snapshot.expires),
    taken_until: snapshot.taken_until === null ? null : new Date(snapshot.taken_until),
  };
  const message = taskMessage(config, row.render, taskRow, runId);
  return { exchange: message.exchange, routingKey: message.routingKey, cc: message.cc ?? [], payload: message.payload, messageId: message.messageId ?? row.message_id };
}

/**
 * The outbox relay: publishes outbox rows in id order (see RELAY_LOCK) on a confirm channel and deletes them
 * only after RabbitMQ confirmed them; it reads from a cursor (src/exchanges/outboxCursor.ts). RabbitMQ down →
 * rows wait; a relay that dies mid-batch leaves its rows, which the next relay publishes again (duplicates are
 * possible, losses are not; consumers dedupe on messageId).
 */
export async function startRelay(options: { config: Config; pool?: pg.Pool; log?: (line: string) => void; connectionName?: string }) {
  const { config } = options;
  const log = options.log ?? ((line: string) => console.log(`relay: ${line}`));
  // Every statement of the relay's own sessions is a named one whose generic plan is the one wanted (CURSOR_READ),
  // an index scan of the outbox whatever its statistics say (src/db/pool.ts).
  const pool = options.pool ?? createPool(config.databaseUrl, 2, { genericPlans: true, indexScansOnly: true });
  const ownPool = !options.pool;
  const stats: RelayStats = { published: 0, batches: 0, reconnects: 0, connections: 0, active: false, gaps: 0, gapOverflows: 0, spacedReads: 0 };
  const cursor = new OutboxCursor({ batch: BATCH });
  // Checked once per active period, before its first read; false: every read is a full read.
  let cursorChecked = false;
  let cursorUsable = false;
  let stopped = false;
  let wake: (() => void) | undefined;
  // A NOTIFY that arrives while a batch is being published must not be lost: it skips the next sleep.
  let notified = false;
  // The deferred lane may hold rows: set when the relay becomes active, by its NOTIFY, while a read of it is full, and
  // after a second without any NOTIFY.
  let deferredWaiting = true;
  let lockClient: DbSession | undefined;
  let amqpConnection: BusConnection | undefined;
  let channel: BusConfirmChannel | undefined;

  /** Waits `ms` or until woken (a NOTIFY, a stop): true when the whole time passed. */
  const sleep = (ms: number) =>
    new Promise<boolean>((resolve) => {
      if (notified) {
        notified = false;
        resolve(false);
        return;
      }
      const timer = setTimeout(() => done(true), ms);
      function done(timedOut = false) {
        clearTimeout(timer);
        notified = false;
        wake = undefined;
        resolve(timedOut);
      }
      wake = done;
    });

  const dbOutage = new OutageLog(log, 'Postgres (relay lock session)');
  const publishOutage = new OutageLog(log, 'publishing');
  // Set when the lock session fails: the advisory lock went with it and a standby may hold it now.
  let lockLost = false;

  const acquireLock = async () => {
    while (!stopped) {
      let client: DbSession | undefined;
      try {
        client = await connectSession(config.databaseUrl);
        for (;;) {
          if (stopped) {
            await client.end();
            return;
          }
          const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [RELAY_LOCK]);
          dbOutage.recovered();
          if (rows[0].ok) break;
          await sleep(1000);
        }
        const session = client;
        session.on('notification', (message: { channel: string }) => {
          if (message.channel === DEFERRED_CHANNEL) deferredWaiting = true;
          notified = true;
          wake?.();
        });
        // The lock lives and dies with this session: the moment it fails, stop publishing.
        const onLost = (err?: Error) => {
          if (lockClient !== session || lockLost) return;
          lockLost = true;
          stats.active = false;
          log(`lost the relay lock session (${err?.message ?? 'connection ended'}); stopped publishing, trying to become active again`);
          wake?.();
        };
        session.on('error', onLost);
        session.on('end', () => onLost());
        // one LISTEN a statement: the embedded PGlite session takes them one at a time (src/db/pglite.ts)
        await session.query(`LISTEN ${OUTBOX_CHANNEL}`);
        await session.query(`LISTEN ${DEFERRED_CHANNEL}`);
        lockClient = session;
        lockLost = false;
        stats.active = true;
        log('active (holds the relay lock)');
        return;
      } catch (err) {
        await client?.end().catch(() => undefined);
        dbOutage.failed(err, 'retrying to take the relay lock');
        await sleep(1000);
      }
    }
  };

  /**
   * Whether this relay still holds the lock, asked of the lock session itself before every batch: a session
   * killed without a word reaching us (pg_terminate_backend, a network cut) fails this round trip, so at most
   * the batch in flight overlaps a standby that took the lock. ~0.1 ms a batch of up to 500 messages here.
   */
  const stillActive = async (): Promise<boolean> => {
    const session = lockClient;
    if (!session || lockLost) return false;
    try {
      await session.query('SELECT 1');
      return !lockLost;
    } catch (err) {
      if (lockClient === session && !lockLost) {
        lockLost = true;
        stats.active = false;
        log(`lost the relay lock session (${(err as Error).message}); stopped publishing, trying to become active again`);
      }
      return false;
    }
  };

  const releaseLockSession = async () => {
    const old = lockClient;
    lockClient = undefined;
    // a dead pg.Client may still emit 'error': an unheard one would crash the process
    old?.removeAllListeners().on('error', () => undefined);
    await old?.end().catch(() => undefined);
  };

  const bus = new BusReconnect({
    url: config.amqpUrl,
    // named so operators (and tests) can find it in `rabbitmqctl list_connections`
    connectionName: options.connectionName ?? 'tgs-relay',
    what: 'RabbitMQ',
    log,
    firstDelayMs: 100,
    maxDelayMs: 5000,
    sleep,
    onAttemptFailed: () => stats.reconnects++,
    consequence: async () => {
      const { rows } = await pool.query<{ n: number }>(`SELECT ${UNPUBLISHED_COUNT} AS n`).catch(() => ({ rows: [{ n: -1 }] }));
      return `${rows[0].n} message(s) waiting in the outbox`;
    },
  });

  const connectAmqp = async () => {
    const connected = await bus.connect(async (connection) => {
      connection.on('error', () => undefined);
      const ch = await connection.createConfirmChannel();
      ch.on('error', () => undefined);
      await declareExchanges(ch, config.exchangePrefix);
      return ch;
    }, () => stopped);
    if (!connected) return;
    const { conn: connection, value: ch } = connected;
    // A batch in flight when the connection goes fails its confirm wait and stays in the outbox: it is published
    // again on the next connection (to whichever node that reaches), and consumers drop the copy by its messageId.
    connection.on('close', (err?: Error) => {
      if (amqpConnection !== connection) return;
      amqpConnection = undefined;
      channel = undefined;
      if (!stopped) bus.lost(err);
      wake?.();
    });
    amqpConnection = connection;
    channel = ch;
    stats.connections++;
  };

  /**
   * Whether the cursor can be used: a sequence with a cache hands each backend a block of ids to use later, so
   * an id far below the cursor could still appear. CACHE 1 is what bigserial creates; the check catches an
   * ALTER SEQUENCE made for speed (a migration could not stop a later one), and the relay then reads the
   * whole outbox every time, as a correct if slower fallback.
   */
  const checkSequence = async () => {
    const { rows } = await pool.query<{ cache: number }>(SEQUENCE_CACHE);
    cursorUsable = rows[0]?.cache === 1;
    cursorChecked = true;
    if (!cursorUsable) {
      log(
        `cannot read the outbox from a cursor: its id sequence outbox_id_seq has CACHE ${rows[0]?.cache ?? '?'}, so ids may be used out of order; ` +
          'reading the whole outbox from the start for every batch (slower) until `ALTER SEQUENCE outbox_id_seq CACHE 1`',
      );
    }
  };

  const read = async (plan: OutboxReadPlan) => {
    const startedAt = performance.now();
    const { rows } = await pool.query<OutboxRow & ReadHeader>(
      plan.full ? prepared(FULL_READ, []) : prepared(CURSOR_READ, [plan.after, plan.upTo, plan.gapLo, plan.gapHi]),
    );
    const endedAt = performance.now();
    const header = rows.find((r) => r.id === null);
    if (!header) throw new Error('outbox read: no snapshot row');
    const byId = (a: OutboxRow, b: OutboxRow) => a.id - b.id;
    const batch = rows.filter((r) => r.id !== null && !r.deferred).sort(byId);
    const pulled = rows.filter((r) => r.deferred).sort(byId);
    return { batch, pulled, xmin: BigInt(header.xmin), nextXid: BigInt(header.next_xid), lastTaken: Number(header.last_taken), startedAt, endedAt };
  };

  /**
   * Reads, publishes and deletes one batch of the outbox, the deferred messages of its tasks ahead of it, then one
   * batch of the deferred lane when it may hold rows; `more`: rows may be waiting already (read again at once);
   * `size`: the rows published; `startedAt`: when the read began (performance.now()).
   */
  const publishBatch = async (ch: BusConfirmChannel): Promise<{ more: boolean; size: number; startedAt: number }> => {
    if (!cursorChecked) await checkSequence();
    if (!cursorUsable) cursor.reset();
    const { batch: rows, pulled, ...seen } = await read(cursor.nextRead());
    if (rows.length > 0) await publishRows(ch, [...pulled, ...rows]);
    const { overflow, more } = cursor.advance({ ids: rows.map((r) => r.id), ...seen });
    stats.gaps = cursor.gapCount;
    if (overflow && ++stats.gapOverflows === 1) {
      log(`more than ${MAX_GAPS} outbox id gaps wait for their transactions to end (a long-running transaction holds xmin back?); reading from the start again (logged once)`);
    }
    let laneSize = 0;
    if (deferredWaiting) {
      // Cleared before the read: a NOTIFY of rows committed after its snapshot sets it again.
      deferredWaiting = false;
      const { rows: lane } = await pool.query<OutboxRow>(prepared(DEFERRED_READ, []));
      if (lane.length > 0) await publishRows(ch, lane);
      laneSize = lane.length;
      if (lane.length >= BATCH) deferredWaiting = true;
    }
    return { more: more || laneSize >= BATCH, size: rows.length + pulled.length + laneSize, startedAt: seen.startedAt };
  };

  const indexedExchange = completedExchange(config.exchangePrefix);
  const publishRows = async (ch: BusConfirmChannel, rows: OutboxRow[]) => {
    const publishedAt = Date.now(); // AMQP timestamp (seconds) + RabbitMQ's timestamp_in_ms header: the bridge's lag metric
    // completed tasks with `index.` routes, indexed by the delete's statement (src/indexService/completions.ts)
    const toIndex: string[] = [];
    sendTogether(ch, () => {
      for (const row of rows) {
        const message = outboxMessage(config, row);
        const indexed = completionToIndex(indexedExchange, message);
        if (indexed !== undefined) toIndex.push(indexed);
        ch.publish(message.exchange, message.routingKey, Buffer.from(JSON.stringify(message.payload)), {
          messageId: message.messageId,
          persistent: true,
          contentType: 'application/json',
          timestamp: Math.floor(publishedAt / 1000), headers: { timestamp_in_ms: publishedAt },
          ...(message.cc.length > 0 ? { CC: message.cc } : {}),
        });
      }
    });
    await ch.waitForConfirms();
    const ids = [rows.filter((r) => !r.deferred).map((r) => r.id), rows.filter((r) => r.deferred).map((r) => r.id)];
    await pool.query(toIndex.length === 0 ? prepared(OUTBOX_DELETE, ids) : prepared(OUTBOX_DELETE_INDEXING, [...ids, toIndex]));
    stats.published += rows.length;
    stats.batches++;
  };

  const loop = async () => {
    while (!stopped) {
      await acquireLock();
      // A new active period starts with a full read: what the cursor knew is from before another relay was active.
      cursor.reset();
      deferredWaiting = true;
      cursorChecked = false;
      while (!stopped) {
        if (!channel) await connectAmqp();
        const ch = channel;
        if (!ch || stopped) continue;
        if (!(await stillActive())) break;
        try {
          const { more, size, startedAt } = await publishBatch(ch);
          publishOutage.recovered();
          if (!more && size >= LOADED_BATCH) {
            stats.spacedReads++;
            const spacing = startedAt + LOADED_SPACING_MS - performance.now();
            if (spacing > 0) await new Promise((resolve) => setTimeout(resolve, spacing));
          }
          // A second without a NOTIFY: look at the deferred lane too, in case its NOTIFY was lost (the outbox's own
          // backstop is this read; src/db/pool.ts notifyAfterCommit).
          if (!more && (await sleep(1000))) deferredWaiting = true;
        } catch (err) {
          // The batch's rows stay in the outbox (and in its deferred lane): read from the start again.
          cursor.reset();
          deferredWaiting = true;
          stats.gaps = 0;
          if (stopped) break;
          publishOutage.failed(err, 'the batch stays in the outbox and is sent again');
          const old = amqpConnection;
          amqpConnection = undefined;
          channel = undefined;
          await old?.close().catch(() => undefined);
          await sleep(200);
        }
      }
      // Lost the lock (or stopping): a new session takes the lock again once a standby lets go of it.
      await releaseLockSession();
      // Step down first: a standby tries every second, so it takes over instead of this relay, whose session
      // just failed (a flaky network or a restarting server is likelier to fail it again).
      const until = Date.now() + STEP_DOWN_MS;
      while (!stopped && Date.now() < until) await sleep(until - Date.now());
    }
  };
  const running = loop();

  return {
    stats,
    async stop() {
      stopped = true;
      wake?.();
      await running;
      await amqpConnection?.close().catch(() => undefined);
      // a second stop finds the pool ended
      if (ownPool && !pool.ended) await pool.end();
    },
  };
}
