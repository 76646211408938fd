import { OutageLog } from '../outageLog.js';
import { connectBus, type BusChannel, type BusConnection } from './bus.js';

export interface BusReconnectOptions {
  /** AMQP_URL: one node or several (src/exchanges/bus.ts busNodes) */
  url: string;
  /** shown in `rabbitmqctl list_connections` */
  connectionName: string;
  /** what the log lines name, e.g. `bridge: RabbitMQ` */
  what: string;
  log: (line: string) => void;
  /** the wait after the first failed attempt, doubling up to maxDelayMs */
  firstDelayMs: number;
  maxDelayMs: number;
  /** what the outage means for this process, for its first line (e.g. how many messages wait) */
  consequence?: () => Promise<string> | string;
  /** waits between attempts (default a timer); the relay's wakes early when it is stopped */
  sleep?: (ms: number) => Promise<unknown>;
  /** called after each failed attempt (the relay counts them) */
  onAttemptFailed?: () => void;
}

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/**
 * Keeps one process's RabbitMQ connection: connects (trying each node of a cluster in turn), sets it up, and after
 * the connection is lost connects again with backoff, starting at the node after the one it lost. The relay and the
 * bridge share it. Logs say an outage once when it starts and once when it ends, and a move to another node once
 * (which node it left, which it reached), never a password.
 */
export class BusReconnect {
  private readonly outage: OutageLog;
  /** the node of the connection set up last */
  private node: string | undefined;
  /** the node whose connection was lost, and why, until a connection is set up again */
  private left: { node: string | undefined; reason: string } | undefined;

  constructor(private readonly options: BusReconnectOptions) {
    this.outage = new OutageLog(options.log, options.what);
  }

  get down(): boolean {
    return this.outage.down;
  }

  /** The node connected to, as logs name it (`amqp://h2:5672`). */
  get currentNode(): string | undefined {
    return this.node;
  }

  /**
   * The connection set up last is gone (it closed, or its channel failed). Nothing is logged yet: if the next
   * attempt reaches a node, one line says the move; if it fails, the outage line says this loss.
   */
  lost(err: Error | undefined): void {
    this.left = { node: this.node, reason: err?.message ?? 'connection closed' };
  }

  /**
   * Connects and runs `setup` on the connection until both succeed or `stopped()`; returns the connection and what
   * setup returned (undefined once stopped). A connection whose setup failed is closed before the next attempt.
   * `fatal` errors are thrown at once.
   */
  async connect<T>(
    setup: (conn: BusConnection) => Promise<T>,
    stopped: () => boolean,
    /** errors that retrying cannot mend (a setup the broker refuses as configured): thrown instead of retried */
    fatal: (err: unknown) => boolean = () => false,
  ): Promise<{ conn: BusConnection; value: T } | undefined> {
    let attempt = 0;
    while (!stopped()) {
      let conn: BusConnection | undefined;
      try {
        conn = await connectBus(this.options.url, { connectionName: this.options.connectionName, after: this.left?.node });
        const value = await setup(conn);
        this.reached(conn.node);
        return { conn, value };
      } catch (err) {
        await conn?.close().catch(() => undefined);
        if (fatal(err)) throw err;
        attempt++;
        this.options.onAttemptFailed?.();
        if (!this.outage.down) {
          const left = this.left ? `${this.left.node ?? 'RabbitMQ'} lost (${this.left.reason}); ` : '';
          const consequence = (await this.options.consequence?.()) ?? 'reconnecting';
          this.outage.failed(new Error(`${left}${(err as Error).message}`), consequence);
        } else {
          this.outage.failed(err);
        }
        await (this.options.sleep ?? sleep)(Math.min(this.options.firstDelayMs * 2 ** attempt, this.options.maxDelayMs));
      }
    }
    return undefined;
  }

  private reached(node: string | undefined): void {
    const left = this.left;
    this.left = undefined;
    const moved = left?.node !== undefined && node !== left.node ? `moved from ${left.node} to ${node}` : '';
    if (this.outage.down) this.outage.recovered(moved || (node ? `on ${node}` : ''));
    else if (left) this.options.log(`${this.options.what}: connection to ${left.node ?? 'RabbitMQ'} lost (${left.reason}); ${moved || `connected to ${node ?? 'it'} again`}`);
    this.node = node;
  }
}

/**
 * A consumer's channel on a connection just made: errors of the connection and the channel are left to their 'close'
 * events (a 'close' follows every 'error'), and at most `prefetch` messages are unacked at once.
 */
export async function consumerChannel(conn: BusConnection, prefetch: number): Promise<BusChannel> {
  conn.on('error', () => undefined);
  const ch = await conn.createChannel();
  ch.on('error', () => undefined);
  await ch.prefetch(prefetch);
  return ch;
}

/**
 * Calls `lost` when the connection or its channel closes. A lost connection closes its channel first: a turn later,
 * the connection's own reason is the one passed.
 */
export function whenLost(conn: BusConnection, ch: BusChannel, lost: (conn: BusConnection, reason?: Error) => void): void {
  conn.on('close', (closeErr?: Error) => lost(conn, closeErr));
  ch.on('close', () => setImmediate(() => lost(conn, new Error('channel closed'))));
}
