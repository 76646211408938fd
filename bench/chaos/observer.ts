import amqp from 'amqplib';
import { allExchangeNames } from '../../src/exchanges/exchanges.js';

export interface Seen {
  exchange: string;
  routingKey: string;
  /** arrival times, one per delivery: more than one is a duplicate */
  at: number[];
}

/**
 * Every message of the run's exchanges, consumed into a durable queue of the harness's own (so a RabbitMQ
 * restart keeps what was not yet delivered), keyed by messageId with each arrival's time. Reconnects after
 * the broker went away, as any consumer must.
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

  private async connect(): Promise<void> {
    const connection = await amqp.connect(this.amqpUrl);
    const channel = await connection.createChannel();
    const queue = `${this.prefix}chaos-observer`;
    await channel.assertQueue(queue, { durable: true });
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
