import type pg from 'pg';
import type { Client } from '@temporalio/client';
import type { Config } from '../config.js';
import { connectSession, createPool } from '../db/pool.js';
import { sendTogether, type BusConfirmChannel, type BusConnection, busLabel } from '../exchanges/bus.js';
import { BusReconnect } from '../exchanges/busReconnect.js';
import { declareExchanges } from '../exchanges/declare.js';
import { allExchangeNames } from '../exchanges/exchanges.js';
import { DEFERRED_CHANNEL, OUTBOX_CHANNEL, UNPUBLISHED_COUNT } from '../exchanges/outbox.js';
import { MAX_GAPS, OutboxCursor } from './outboxCursor.js';
import { checkBatch, type PublishContext } from './outboxMessage.js';
import { deletePublished, moveToDeadLetters, OUTBOX_BATCH, outboxSequenceCache, readDeferredLane, readOutbox, type OutboxRow } from './outboxStore.js';
import { readSpacing } from './readSpacing.js';
import { RelayLock } from './relayLock.js';
import { OutageLog } from '../outageLog.js';
import { completedExchange } from '../indexService/completions.js';
import { GraphSignalLane, type GraphSignalLaneStats } from './graphSignalLane.js';

// The relay's wiring. Only one relay publishes at a time (src/relay/relayLock.ts), so messages leave in outbox id
// order, but for a row whose transaction committed after a higher id's row was read (it follows in a later batch);
// per task order is kept (src/relay/outboxCursor.ts). The deferred lane (a graph's task-defined messages,
// migration 021) goes out a batch between the outbox's batches, and a task's deferred message ahead of the first
// outbox batch that holds another message of that task (src/relay/outboxStore.ts). Its statements are
// src/relay/outboxStore.ts; what a row's message is, and whether it can ever be published, outboxMessage.ts. With a
// Temporal client the relay also feeds graphs: each read records the graph signals of the resolutions it read and the
// graph-signal lane sends them at once (src/relay/graphSignalLane.ts), beside the publish.

export interface RelayStats extends Partial<GraphSignalLaneStats> {
  published: number;
  batches: number;
  reconnects: number;
  /** successful AMQP connections (more than one: the relay lost and re-established its connection) */
  connections: number;
  active: boolean;
  /** ranges of outbox ids below the read cursor still watched for a late commit (src/relay/outboxCursor.ts) */
  gaps: number;
  /** times the gaps outgrew their bound and the relay started over with a full read */
  gapOverflows: number;
  /** reads after a loaded batch, started LOADED_SPACING_MS after its read at the soonest (src/relay/readSpacing.ts) */
  spacedReads: number;
  /** rows that can never be published, moved to outbox_dead_letters (migration 028) */
  deadLettered: number;
}

/**
 * The outbox relay: publishes outbox rows in id order on a confirm channel and deletes them only after RabbitMQ
 * confirmed them; it reads from a cursor (src/relay/outboxCursor.ts). RabbitMQ down → rows wait; a relay that
 * dies mid-batch leaves its rows, which the next relay publishes again (duplicates are possible, losses are not;
 * consumers dedupe on messageId). A row that can never be published (src/relay/outboxMessage.ts publishable)
 * is moved to outbox_dead_letters instead, so it holds up nothing.
 */
export async function startRelay(options: {
  config: Config;
  pool?: pg.Pool;
  log?: (line: string) => void;
  connectionName?: string;
  /**
   * Temporal, for the graph-signal lane: every composition root passes it. Undefined: the relay only publishes (tests of
   * the publish alone), and graphs would hear resolutions only from their 60 s reconciliation; the option is required
   * so that no caller leaves it out by accident.
   */
  temporal: (() => Promise<Client>) | undefined;
}) {
  const { config } = options;
  const log = options.log ?? ((line: string) => console.log(`relay: ${line}`));
  // Every statement of the relay's own sessions is a named one whose generic plan is the one wanted (CURSOR_READ),
  // an index scan of the outbox whatever its statistics say (src/db/pool.ts).
  const pool = options.pool ?? createPool(config.databaseUrl, 2, { genericPlans: true, indexScansOnly: true });
  const ownPool = !options.pool;
  const stats: RelayStats = { published: 0, batches: 0, reconnects: 0, connections: 0, active: false, gaps: 0, gapOverflows: 0, spacedReads: 0, deadLettered: 0 };
  const laneStats: GraphSignalLaneStats = { signals: 0, resolutionsSignalled: 0, failedSignals: 0, signalsWaiting: 0 };
  if (options.temporal) Object.assign(stats, laneStats);
  const lane = options.temporal ? new GraphSignalLane({ config, pool, temporal: options.temporal, stats: stats as RelayStats & GraphSignalLaneStats, log }) : undefined;
  const cursor = new OutboxCursor({ batch: OUTBOX_BATCH });
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

  const publishOutage = new OutageLog(log, 'publishing');
  const lock = new RelayLock({
    connect: () => connectSession(config.databaseUrl),
    channels: [OUTBOX_CHANNEL, DEFERRED_CHANNEL],
    onNotification: (channel) => {
      if (channel === DEFERRED_CHANNEL) deferredWaiting = true;
      notified = true;
      wake?.();
    },
    onActive: (active) => {
      stats.active = active;
      if (active) lane?.activate();
      else lane?.deactivate();
      if (!active) wake?.();
    },
    sleep,
    stopped: () => stopped,
    log,
  });

  const bus = new BusReconnect({
    url: config.amqpUrl,
    // named so operators (and tests) can find it in `rabbitmqctl list_connections`
    connectionName: options.connectionName ?? 'tgs-relay',
    what: busLabel(config.amqpUrl),
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
    const cache = await outboxSequenceCache(pool);
    cursorUsable = cache === 1;
    cursorChecked = true;
    if (!cursorUsable) {
      log(
        `cannot read the outbox from a cursor: its id sequence outbox_id_seq has CACHE ${cache ?? '?'}, so ids may be used out of order; ` +
          'reading the whole outbox from the start for every batch (slower) until `ALTER SEQUENCE outbox_id_seq CACHE 1`',
      );
    }
  };

  /**
   * Reads, publishes and deletes one batch of the outbox, the deferred messages of its tasks ahead of it, then one
   * batch of the deferred lane when it may hold rows; `more`: rows may be waiting already (read again at once);
   * `size`: the rows published; `startedAt`: when the read began (performance.now()).
   */
  const publishBatch = async (ch: BusConfirmChannel): Promise<{ more: boolean; size: number; startedAt: number }> => {
    if (!cursorChecked) await checkSequence();
    if (!cursorUsable) cursor.reset();
    const { batch: rows, pulled, heard, ...seen } = await readOutbox(pool, cursor.nextRead(), lane !== undefined);
    // recorded and committed by the read: signalled at once, while the batch is published
    lane?.heard(heard);
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
      const lane = await readDeferredLane(pool);
      if (lane.length > 0) await publishRows(ch, lane);
      laneSize = lane.length;
      if (lane.length >= OUTBOX_BATCH) deferredWaiting = true;
    }
    return { more: more || laneSize >= OUTBOX_BATCH, size: rows.length + pulled.length + laneSize, startedAt: seen.startedAt };
  };

  const context: PublishContext = { config, declared: new Set(allExchangeNames(config.exchangePrefix)), indexed: completedExchange(config.exchangePrefix) };
  /**
   * Publishes `rows` in their order, waits for the broker's confirms, then deletes them. A row that can never be
   * published is not sent: it is moved to outbox_dead_letters and logged, once (the move returns only rows it moved).
   * Anything that fails from the publish on (the broker, the channel, Postgres) throws, and the whole batch stays
   * where it is to be sent again: those failures pass, and a row is set aside only for what is wrong with the row.
   */
  const publishRows = async (ch: BusConfirmChannel, rows: OutboxRow[]) => {
    const { publish, dead, toIndex } = checkBatch(context, rows);
    if (publish.length > 0) {
      const publishedAt = Date.now(); // AMQP timestamp (seconds) + RabbitMQ's timestamp_in_ms header: the bridge's lag metric
      sendTogether(ch, () => {
        for (const { message } of publish) {
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
    }
    if (dead.length > 0) {
      const reasons = new Map(dead.map(({ row, reason }) => [`${row.deferred ? 'deferred' : 'outbox'}/${row.id}`, reason]));
      for (const moved of await moveToDeadLetters(pool, dead)) {
        stats.deadLettered++;
        log(
          `set aside ${moved.lane === 'deferred' ? 'outbox_deferred' : 'outbox'} row ${moved.source_id} (message ${moved.message_id}) as outbox_dead_letters row ${moved.id}: ` +
            `${reasons.get(`${moved.lane}/${moved.source_id}`)}; the messages after it go on (docs/operations.md § Dead-lettered messages)`,
        );
      }
    }
    if (publish.length > 0) await deletePublished(pool, publish.map((p) => p.row), toIndex);
    stats.published += publish.length;
    stats.batches++;
  };

  const loop = async () => {
    while (!stopped) {
      if (!(await lock.acquire())) break;
      // A new active period starts with a full read: what the cursor knew is from before another relay was active.
      cursor.reset();
      deferredWaiting = true;
      cursorChecked = false;
      while (!stopped) {
        if (!channel) await connectAmqp();
        const ch = channel;
        if (!ch || stopped) continue;
        if (!(await lock.stillHeld())) break;
        try {
          const batch = await publishBatch(ch);
          publishOutage.recovered();
          const spacing = readSpacing(batch, performance.now());
          if (spacing !== undefined) {
            stats.spacedReads++;
            if (spacing > 0) await new Promise((resolve) => setTimeout(resolve, spacing));
          }
          const { more } = batch;
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
      await lock.release();
      await lock.stepDown();
    }
  };
  const running = loop();

  return {
    stats,
    async stop() {
      stopped = true;
      wake?.();
      await running;
      await lane?.stop();
      await amqpConnection?.close().catch(() => undefined);
      // a second stop finds the pool ended
      if (ownPool && !pool.ended) await pool.end();
    },
  };
}
