import { busLabel } from '../exchanges/bus.js';
import type { Config } from '../config.js';
import type { BusChannel, BusConnection, BusMessage } from '../exchanges/bus.js';
import { BusReconnect, consumerChannel, whenLost } from '../exchanges/busReconnect.js';
import { BridgeQueueMismatchError, deadLetterDepth, declareBridgeQueue } from './bridgeQueue.js';
import { bridgeBindings } from './messages.js';
import { declareDeploymentMarker } from './deploymentMarker.js';

export interface BridgeConsumerOptions {
  config: Config;
  queueName: string;
  /** this deployment's id (src/db/deployment.ts), declared in its marker before the queue (src/bridge/deploymentMarker.ts); absent: no marker (tests of the queue alone) */
  deploymentId?: () => Promise<string>;
  log: (line: string) => void;
  /** unacked messages the broker hands the bridge at once (its flushes gather them) */
  prefetch: number;
  /** A message arrived on `ch`, the channel to ack it on. */
  onMessage(msg: BusMessage, ch: BusChannel): void;
  /** The channel is gone (its unacked messages went back to the queue): forget what it delivered. */
  onLost(): void;
  /** The dead-letter queue's depth, read every DEAD_LETTER_READ_MS (quorum queue only). */
  onDeadLetterDepth?(messages: number): void;
}

/** How often the dead-letter queue's depth is read for tgs_bridge_dead_letter_messages. */
const DEAD_LETTER_READ_MS = 30_000;

export interface BridgeConsumer {
  /** the channel consuming now; undefined while reconnecting */
  readonly channel: BusChannel | undefined;
  stop(): Promise<void>;
}

/**
 * The bridge's AMQP side: declares its queue, consumes it, and after a lost connection (a broker restart, a node of
 * the cluster gone, a channel error) connects again, to another node when AMQP_URL lists several. Resolves once it
 * consumes; rejects if the queue's declaration is refused as configured (BridgeQueueMismatchError), which no retry
 * mends.
 */
export async function startBridgeConsumer(options: BridgeConsumerOptions): Promise<BridgeConsumer> {
  const { config, queueName, log } = options;
  let stopped = false;
  let connection: BusConnection | undefined;
  let channel: BusChannel | undefined;
  const bus = new BusReconnect({ url: config.amqpUrl, connectionName: 'tgs-bridge', what: `bridge: ${busLabel(config.amqpUrl)}`, log, firstDelayMs: 200, maxDelayMs: 5000 });

  const lost = (conn: BusConnection, err: Error | undefined) => {
    if (connection !== conn) return;
    connection = undefined;
    channel = undefined;
    options.onLost();
    void conn.close().catch(() => undefined);
    if (stopped) return;
    bus.lost(err);
    void connect(false);
  };

  let deadLetterTimer: NodeJS.Timeout | undefined;
  /** Reads the dead-letter queue's depth on `ch` now and every DEAD_LETTER_READ_MS while `ch` consumes. */
  const readDeadLetters = (ch: BusChannel) => {
    const report = options.onDeadLetterDepth;
    if (!report || config.bridgeQueueType !== 'quorum') return;
    const read = () => {
      if (channel !== ch || stopped) return;
      deadLetterDepth(ch, config).then(report, () => undefined); // a failed read closes the channel: lost() follows
      deadLetterTimer = setTimeout(read, DEAD_LETTER_READ_MS);
      deadLetterTimer.unref();
    };
    clearTimeout(deadLetterTimer);
    read();
  };

  let consumingLogged = false;
  const connect = async (first: boolean): Promise<void> => {
    const connected = await bus.connect(
      async (conn) => {
        // 'close' follows every 'error'; what it means is logged there
        const ch = await consumerChannel(conn, options.prefetch);
        if (options.deploymentId) await declareDeploymentMarker(ch, config, await options.deploymentId());
        await declareBridgeQueue(ch, config, queueName);
        connection = conn;
        channel = ch;
        whenLost(conn, ch, lost);
        try {
          await ch.consume(queueName, (msg) => {
            if (msg && channel === ch) options.onMessage(msg, ch);
          }, { noAck: false });
        } catch (err) {
          connection = undefined;
          channel = undefined;
          throw err;
        }
        return ch;
      },
      () => stopped,
      (err) => first && err instanceof BridgeQueueMismatchError,
    );
    if (!connected) return;
    readDeadLetters(connected.value);
    if (!consumingLogged) log(`bridge: consuming ${queueName} (${config.bridgeQueueType} queue, bindings ${bridgeBindings(config).join(', ')})`);
    consumingLogged = true;
  };
  await connect(true);

  return {
    get channel() {
      return channel;
    },
    async stop() {
      stopped = true;
      clearTimeout(deadLetterTimer);
      await connection?.close().catch(() => undefined);
    },
  };
}
