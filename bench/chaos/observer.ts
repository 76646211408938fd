import amqp from 'amqplib';
import { allExchangeNames } from '../../src/exchanges/exchanges.js';
import { busNodes } from '../../src/exchanges/bus.js';

export interface Seen {
  exchange: string;
  routingKey: string;
  /** arrival times, one per delivery: more than one is a duplicate */
  at: number[];
}

/**
 * Every message of the run's exchanges, consumed into a durable queue of the harness's own (so a RabbitMQ
 * restart keeps what was not yet delivered), keyed by messageId with each arrival's time. Reconnects after
 * the broker went away, as any consumer must. On a cluster (AMQP_URL lists several nodes) the queue is a quorum
 * queue, so that it outlives the node it was declared on (a classic queue on a stopped node drops what is routed to
 * it), and each connection tries the nodes in turn, starting after the one it last used.
 */
export class Observer {
  readonly messages = new Map<string, Seen>();
  private connection: amqp.ChannelModel | undefined;
  private stopped = false;
  reconnects = 0;

  constructor(
    private readonly amqpUrl: string,
    private readonly prefix: string,
    private readonly log: (line: string) => void,
  ) {}

  async start(): Promise<void> {
    await this.connect();
  }

  private next = 0;

  private async connect(): Promise<void> {
    const nodes = busNodes(this.amqpUrl);
    let connection: amqp.ChannelModel | undefined;
    for (let k = 0; k < nodes.length && !connection; k++) {
      const url = nodes[(this.next + k) % nodes.length];
      try {
        connection = await amqp.connect(url);
        this.next = (this.next + k + 1) % nodes.length;
      } catch (err) {
        if (k === nodes.length - 1) throw err;
      }
    }
    if (!connection) throw new Error('no RabbitMQ node answered');
    const channel = await connection.createChannel();
    const queue = `${this.prefix}chaos-observer`;
    await channel.assertQueue(queue, { durable: true, ...(nodes.length > 1 ? { arguments: { 'x-queue-type': 'quorum' } } : {}) });
    for (const name of allExchangeNames(this.prefix)) {
      await channel.assertExchange(name, 'topic', { durable: true });
      await channel.bindQueue(queue, name, '#');
    }
    await channel.prefetch(2000);
    await channel.consume(queue, (msg) => {
      if (!msg) return;
      const id = String(msg.properties.messageId ?? `${msg.fields.exchange}:${msg.fields.routingKey}:${msg.content.toString('base64').slice(0, 40)}`);
      const seen = this.messages.get(id);
      if (seen) seen.at.push(Date.now());
      else this.messages.set(id, { exchange: msg.fields.exchange.slice(this.prefix.length), routingKey: msg.fields.routingKey, at: [Date.now()] });
      channel.ack(msg);
    });
    const again = () => {
      if (this.stopped || this.connection !== connection) return;
      this.connection = undefined;
      void this.reconnect();
    };
    connection.on('error', () => undefined);
    connection.on('close', again);
    channel.on('error', () => undefined);
    channel.on('close', again);
    this.connection = connection;
  }

  private async reconnect(): Promise<void> {
    while (!this.stopped) {
      await new Promise((r) => setTimeout(r, 500));
      try {
        await this.connect();
        this.reconnects++;
        this.log(`observer: reconnected`);
        return;
      } catch {
        // the broker is still away
      }
    }
  }

  /** Every message of one exchange (`queue/v1/task-completed`, ...). */
  of(exchange: string): [string, Seen][] {
    return [...this.messages].filter(([, s]) => s.exchange === exchange);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    await this.connection?.close().catch(() => undefined);
  }
}
