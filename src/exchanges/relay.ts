import type pg from 'pg';
import type { Config } from '../config.js';
import { connectSession, createPool, prepared, type DbSession } from '../db/pool.js';
import { connectBus, type BusConfirmChannel, type BusConnection } from './bus.js';
import { declareExchanges } from './declare.js';
import { OUTBOX_CHANNEL } from './outbox.js';
import type { QueueExchange } from './exchanges.js';
import { taskMessage } from '../queue/messages.js';
import { OutageLog } from '../outageLog.js';
import type { TaskRow } from '../queue/taskRow.js';

// Only one relay publishes at a time, so messages leave in outbox id order (per task order included).
const RELAY_LOCK = 7_471_020_232;
const BATCH = 500;
/** After its lock session failed, how long a relay waits before taking the lock again: standbys try every 1 s. */
const STEP_DOWN_MS = 2500;

export interface RelayStats {
  published: number;
  batches: number;
  reconnects: number;
  /** successful AMQP connections (more than one: the relay lost and re-established its connection) */
  connections: number;
  active: boolean;
}

export interface OutboxRow {
  id: number;
  message_id: string;
  exchange: string;
  routing_key: string;
  cc: string[];
  payload: unknown;
  render: QueueExchange | null;
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
 * The outbox relay: publishes outbox rows in id order on a confirm channel and deletes them only after
 * RabbitMQ confirmed them. RabbitMQ down → rows wait; a relay that dies mid-batch leaves its rows, which
 * the next relay publishes again (duplicates are possible, losses are not; consumers dedupe on messageId).
 */
export async function startRelay(options: { config: Config; pool?: pg.Pool; log?: (line: string) => void; connectionName?: string }) {
  const { config } = options;
  const log = options.log ?? ((line: string) => console.log(`relay: ${line}`));
  const pool = options.pool ?? createPool(config.databaseUrl, 2);
  const ownPool = !options.pool;
  const stats: RelayStats = { published: 0, batches: 0, reconnects: 0, connections: 0, active: false };
  let stopped = false;
  let wake: (() => void) | undefined;
  // A NOTIFY that arrives while a batch is being published must not be lost: it skips the next sleep.
  let notified = false;
  let lockClient: DbSession | undefined;
  let amqpConnection: BusConnection | undefined;
  let channel: BusConfirmChannel | undefined;

  const sleep = (ms: number) =>
    new Promise<void>((resolve) => {
      if (notified) {
        notified = false;
        resolve();
        return;
      }
      const timer = setTimeout(done, ms);
      function done() {
        clearTimeout(timer);
        notified = false;
        wake = undefined;
        resolve();
      }
      wake = done;
    });

  const dbOutage = new OutageLog(log, 'Postgres (relay lock session)');
  const amqpOutage = new OutageLog(log, 'RabbitMQ');
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
        session.on('notification', () => {
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
        await session.query(`LISTEN ${OUTBOX_CHANNEL}`);
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

  const connectAmqp = async () => {
    let attempt = 0;
    while (!stopped) {
      try {
        // named so operators (and tests) can find it in `rabbitmqctl list_connections`
        const connection = await connectBus(config.amqpUrl, { connectionName: options.connectionName ?? 'tgs-relay' });
        connection.on('error', () => undefined);
        connection.on('close', (err?: Error) => {
          if (amqpConnection === connection) {
            amqpConnection = undefined;
            channel = undefined;
            if (!stopped) amqpOutage.failed(err ?? new Error('connection closed'), 'outbox rows wait until it is back');
            wake?.();
          }
        });
        const ch = await connection.createConfirmChannel();
        ch.on('error', () => undefined);
        await declareExchanges(ch, config.exchangePrefix);
        amqpConnection = connection;
        channel = ch;
        stats.connections++;
        amqpOutage.recovered();
        return;
      } catch (err) {
        attempt++;
        stats.reconnects++;
        if (!amqpOutage.down) {
          const { rows } = await pool.query<{ n: number }>('SELECT count(*) AS n FROM outbox').catch(() => ({ rows: [{ n: -1 }] }));
          amqpOutage.failed(err, `${rows[0].n} message(s) waiting in the outbox`);
        } else {
          amqpOutage.failed(err);
        }
        await sleep(Math.min(100 * 2 ** attempt, 5000));
      }
    }
  };

  const publishBatch = async (ch: BusConfirmChannel): Promise<number> => {
    const { rows } = await pool.query<OutboxRow>(
      prepared(`SELECT id, message_id, exchange, routing_key, cc, payload, render FROM outbox ORDER BY id LIMIT ${BATCH}`, []),
    );
    if (rows.length === 0) return 0;
    const publishedAt = Date.now(); // AMQP timestamp (seconds) + RabbitMQ's timestamp_in_ms header: the bridge's lag metric
    for (const row of rows) {
      const message = outboxMessage(config, row);
      ch.publish(message.exchange, message.routingKey, Buffer.from(JSON.stringify(message.payload)), {
        messageId: message.messageId,
        persistent: true,
        contentType: 'application/json',
        timestamp: Math.floor(publishedAt / 1000), headers: { timestamp_in_ms: publishedAt },
        ...(message.cc.length > 0 ? { CC: message.cc } : {}),
      });
    }
    await ch.waitForConfirms();
    await pool.query(prepared('DELETE FROM outbox WHERE id = ANY($1)', [rows.map((r) => r.id)]));
    stats.published += rows.length;
    stats.batches++;
    return rows.length;
  };

  const loop = async () => {
    while (!stopped) {
      await acquireLock();
      while (!stopped) {
        if (!channel) await connectAmqp();
        const ch = channel;
        if (!ch || stopped) continue;
        if (!(await stillActive())) break;
        try {
          const n = await publishBatch(ch);
          publishOutage.recovered();
          if (n < BATCH) await sleep(1000);
        } catch (err) {
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
      if (ownPool) await pool.end();
    },
  };
}
