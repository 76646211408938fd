import { busLabel } from '../exchanges/bus.js';
import type pg from 'pg';
import type { Config } from '../config.js';
import { connectSession, type DbSession } from '../db/pool.js';
import type { BusChannel, BusConnection, BusMessage } from '../exchanges/bus.js';
import { BusReconnect, whenLost } from '../exchanges/busReconnect.js';
import { declareHookListenerQueue } from './listenerQueue.js';
import { OutageLog } from '../outageLog.js';
import type { LazyTemporalClient } from '../temporal/connection.js';
import { HOW_TO_PIN, unpinnedReason } from './bindings.js';
import { HOOK_BINDINGS_CHANNEL, hookListenerQueueName, reconcileListenerBindings, type BindingChanges } from './listenerBindings.js';
import { fireHooksForMessage } from './messageFire.js';

/**
 * The hook listener: hooks' `bindings` acted on (docs/formats.md § Hooks). It runs in the bridge process (`tgs bridge`,
 * and `tgs dev`, which runs the bridge in-process): that process is already the deployment's consumer of RabbitMQ with
 * reconnects to the nodes of a cluster, and holds a Postgres pool and a Temporal client (a hook may fire a task-graph,
 * or a task joining one), while the API publishes nothing itself (the relay does) and holds no AMQP connection. The
 * listeners of several bridge processes share the queue as competing consumers.
 *
 * One durable queue per deployment (`<prefix>tgs/hook-listener/<schedulerId>`), kept bound to exactly the union of
 * every hook's bindings (src/hooks/listenerBindings.ts): reconciled in full at every (re)connection, and after every
 * hook write (its transaction notifies `tgs_hook_bindings` on commit), with a reconciliation every 30 s as a backstop
 * for a notification lost while the listener's Postgres session was away. Each message fires every hook whose
 * binding takes it (src/hooks/messageFire.ts), once per (hook, message), and is acked only after those fires are
 * recorded; a message whose fires could not be done (Postgres away) is requeued after a backoff.
 */

/** Messages the broker hands the listener before it acks: they are fired one at a time, in order. */
const PREFETCH = 16;
/** The backstop reconciliation of the queue's bindings with the hooks. */
const RECONCILE_EVERY_MS = 30_000;
/** A message whose fires failed goes back to the queue after this, doubling to the max while failures continue. */
const FIRST_RETRY_MS = 250;
const MAX_RETRY_MS = 10_000;

export interface HookListenerStats {
  messages: number;
  created: number;
  alreadyFired: number;
  refusedOrDeclined: number;
  discarded: number;
  unparsable: number;
  requeued: number;
}

export interface HookListener {
  readonly queueName: string;
  readonly stats: HookListenerStats;
  /** Reconciles the queue's bindings with the hooks now (also what a hook write's notification does). */
  reconcile(): Promise<BindingChanges | undefined>;
  stop(): Promise<void>;
}

export async function startHookListener(options: {
  config: Config;
  pool: pg.Pool;
  temporal: LazyTemporalClient;
  log: (line: string) => void;
}): Promise<HookListener> {
  const { config, pool, log } = options;
  const queueName = hookListenerQueueName(config);
  const env = { pool, config, temporal: options.temporal };
  const stats: HookListenerStats = { messages: 0, created: 0, alreadyFired: 0, refusedOrDeclined: 0, discarded: 0, unparsable: 0, requeued: 0 };
  const firing = new OutageLog(log, 'hook listener: firing hooks');
  const bus = new BusReconnect({ url: config.amqpUrl, connectionName: 'tgs-hook-listener', what: `hook listener: ${busLabel(config.amqpUrl)}`, log, firstDelayMs: 200, maxDelayMs: 5000 });
  let stopped = false;
  let connection: BusConnection | undefined;
  let channel: BusChannel | undefined;
  let retryMs = FIRST_RETRY_MS;

  /** An ack or nack on a channel that closed meanwhile: the broker gave the message back already. */
  const settle = (send: () => void) => {
    try {
      send();
    } catch {
      // the channel is closed: nothing to settle
    }
  };

  /** One message at a time: its hooks fired, then acked; or requeued after a backoff when that failed. */
  let work: Promise<void> = Promise.resolve();
  const handle = async (msg: BusMessage, ch: BusChannel) => {
    if (channel !== ch) return; // its channel is gone: the broker gave it back to the queue
    const cc = msg.properties.headers?.CC;
    try {
      const fires = await fireHooksForMessage(env, {
        exchange: msg.fields.exchange,
        routingKey: msg.fields.routingKey,
        cc: Array.isArray(cc) ? cc.map(String) : [],
        messageId: typeof msg.properties.messageId === 'string' ? msg.properties.messageId : undefined,
        content: msg.content,
      });
      stats.messages++;
      stats.created += fires.created;
      stats.alreadyFired += fires.alreadyFired;
      stats.refusedOrDeclined += fires.refusedOrDeclined;
      stats.discarded += fires.discarded;
      if (fires.unparsable) stats.unparsable++;
      if (firing.down) firing.recovered();
      retryMs = FIRST_RETRY_MS;
      if (channel === ch) settle(() => ch.ack(msg));
    } catch (err) {
      firing.failed(err, 'messages are requeued and fired when it works again');
      await new Promise((resolve) => setTimeout(resolve, retryMs));
      retryMs = Math.min(retryMs * 2, MAX_RETRY_MS);
      stats.requeued++;
      if (channel === ch) settle(() => ch.nack(msg, false, true));
    }
  };

  /** Reconciliations one at a time; `all` binds every wanted binding again (a new connection). */
  let reconciling: Promise<unknown> = Promise.resolve();
  const reconcileOn = (ch: BusChannel, all: boolean): Promise<BindingChanges> => {
    const run = reconciling.then(() => reconcileListenerBindings(pool, ch, config, all));
    reconciling = run.catch(() => undefined);
    return run.then((changes) => {
      const { bound, unbound, skipped, unpinned, unpinnedHooks } = changes;
      if (bound.length + unbound.length > 0) log(`hook listener: bound ${JSON.stringify(bound)}, unbound ${JSON.stringify(unbound)}`);
      if (skipped.length > 0 && all) log(`hook listener: not bound (exchanges not of this deployment's prefix): ${JSON.stringify(skipped)}`);
      if (unpinned.length > 0 && all) {
        log(`hook listener: not bound, and hooks ${unpinnedHooks.join(', ')} fire on none of them until updated: ${unpinnedReason(unpinned)}. ${HOW_TO_PIN}`);
      }
      return changes;
    });
  };
  const reconcile = async (): Promise<BindingChanges | undefined> => {
    const ch = channel;
    if (!ch) return undefined; // reconnecting: the connection reconciles in full
    return reconcileOn(ch, false);
  };
  const reconcileQuietly = () => {
    reconcile().catch((err: unknown) => log(`hook listener: reconciling bindings failed (${(err as Error).message}); tried again in ${RECONCILE_EVERY_MS / 1000} s`));
  };

  const lost = (conn: BusConnection, err: Error | undefined) => {
    if (connection !== conn) return;
    connection = undefined;
    channel = undefined;
    void conn.close().catch(() => undefined);
    if (stopped) return;
    bus.lost(err);
    void connect();
  };

  const connect = async (): Promise<void> => {
    await bus.connect(
      async (conn) => {
        const ch = await declareHookListenerQueue(conn, config, PREFETCH, log);
        await reconcileOn(ch, true);
        connection = conn;
        channel = ch;
        whenLost(conn, ch, lost);
        try {
          await ch.consume(queueName, (msg) => {
            if (msg) work = work.then(() => handle(msg, ch));
          }, { noAck: false });
        } catch (err) {
          connection = undefined;
          channel = undefined;
          throw err;
        }
      },
      () => stopped,
    );
  };

  // Hook writes notify after their commit: a binding changed takes effect within a round trip or two.
  let session: DbSession | undefined;
  let listenRetry: NodeJS.Timeout | undefined;
  const listen = async () => {
    try {
      const s = await connectSession(config.databaseUrl);
      const again = () => {
        if (session !== s) return;
        session = undefined;
        s.removeAllListeners().on('error', () => undefined);
        s.end().catch(() => undefined);
        if (!stopped) listenRetry = setTimeout(() => void listen(), 5000);
      };
      s.on('notification', reconcileQuietly);
      s.on('error', again);
      s.on('end', again);
      await s.query(`LISTEN ${HOOK_BINDINGS_CHANNEL}`);
      if (stopped) return void (await s.end().catch(() => undefined));
      session = s;
      // a change committed while not listening
      reconcileQuietly();
    } catch {
      if (!stopped) listenRetry = setTimeout(() => void listen(), 5000);
    }
  };

  await connect();
  await listen();
  const backstop = setInterval(reconcileQuietly, RECONCILE_EVERY_MS);
  backstop.unref();
  log(`hook listener: consuming ${queueName}`);

  return {
    queueName,
    stats,
    reconcile,
    async stop() {
      stopped = true;
      clearInterval(backstop);
      clearTimeout(listenRetry);
      const s = session;
      session = undefined;
      s?.removeAllListeners().on('error', () => undefined);
      await s?.end().catch(() => undefined);
      await reconciling;
      await connection?.close().catch(() => undefined);
      await work;
    },
  };
}
