import { EventEmitter } from 'node:events';
import { randomBytes } from 'node:crypto';
import type { Message, MessageProperties, Options } from 'amqplib';
import type { BusChannel, BusConfirmChannel, BusConnection, BusMessage } from './busTypes.js';
import { logger } from '../log.js';

/**
 * The in-process message bus of `tgs dev` without AMQP_URL: RabbitMQ's topic exchanges in memory.
 *
 * Same semantics as RabbitMQ for what tgs uses: topic patterns (`*` exactly one word, `#` zero or more
 * words), CC routing keys (a message reaches each bound queue once, however many of its keys match;
 * the CC list is kept in `headers.CC`), messageId and other properties kept, per-queue FIFO, competing
 * consumers served round-robin, prefetch, ack/nack with requeue (redelivered flag set), unacked
 * messages requeued when their channel or connection closes, exclusive and auto-delete queues, and a
 * publish to a missing exchange closing the channel with 404 (a confirm channel's waitForConfirms
 * rejects), a redeclaration with other queue arguments refused with 406, and a quorum queue's delivery limit
 * (a message returned more often is dead-lettered to x-dead-letter-exchange; x-max-length is accepted, not kept). Queues live as long as the process: a consumer that reconnects finds what it left.
 *
 * Limits (dev use only): one process; nothing survives a restart. A message the relay handed over but
 * the bridge had not yet acked when the process stopped is lost — the graph workflow's reconciliation
 * (after 60 s without news it asks the queue) repairs that; the relay's outbox is in the database, so
 * anything not yet published is sent after the restart.
 */

const SCHEME = 'memory://';

export function isMemoryBusUrl(url: string): boolean {
  return url.startsWith(SCHEME);
}

export function memoryBusUrl(name: string): string {
  return `${SCHEME}${name}`;
}

/** RabbitMQ's topic match: words split on `.`; `*` matches exactly one word, `#` zero or more. */
export function topicMatches(pattern: string, routingKey: string): boolean {
  const p = pattern.split('.');
  const k = routingKey.split('.');
  // memo[i][j]: does p[i..] match k[j..]?
  const memo = new Map<number, boolean>();
  const match = (i: number, j: number): boolean => {
    const key = i * (k.length + 1) + j;
    const known = memo.get(key);
    if (known !== undefined) return known;
    let result: boolean;
    if (i === p.length) result = j === k.length;
    else if (p[i] === '#') result = match(i + 1, j) || (j < k.length && match(i, j + 1));
    else result = j < k.length && (p[i] === '*' || p[i] === k[j]) && match(i + 1, j + 1);
    memo.set(key, result);
    return result;
  };
  return match(0, 0);
}

/** Queue arguments a redeclaration must repeat exactly (RabbitMQ answers 406 naming the first that differs, in this order). */
const EQUIVALENT_ARGS = ['x-dead-letter-exchange', 'x-dead-letter-routing-key', 'x-max-length', 'x-queue-type', 'x-delivery-limit'];

class BusError extends Error {
  constructor(
    readonly code: number,
    message: string,
  ) {
    super(message);
    this.name = 'BusError';
  }
}

interface Stored {
  exchange: string;
  routingKey: string;
  content: Buffer;
  properties: MessageProperties;
  redelivered: boolean;
  /** times it was returned to its queue (a nack with requeue, its channel closing): RabbitMQ's x-delivery-count */
  returns?: number;
}

interface Consumer {
  tag: string;
  channel: MemoryChannel;
  onMessage: (msg: BusMessage | null) => void;
  noAck: boolean;
}

interface Queue {
  name: string;
  exclusiveOwner: MemoryConnection | undefined;
  autoDelete: boolean;
  /** the declare arguments that matter here: x-queue-type (checked on redeclare), x-delivery-limit, x-dead-letter-* */
  arguments: Record<string, unknown>;
  ready: Stored[];
  consumers: Consumer[];
  nextConsumer: number;
  hadConsumer: boolean;
  pumping: boolean;
}

interface Binding {
  queue: string;
  pattern: string;
}

class Broker {
  readonly exchanges = new Map<string, { type: string; bindings: Binding[]; alternate?: unknown }>();
  readonly queues = new Map<string, Queue>();

  route(exchange: string, routingKey: string, cc: string[]): Queue[] {
    if (exchange === '') {
      const q = this.queues.get(routingKey);
      return q ? [q] : [];
    }
    const ex = this.exchanges.get(exchange);
    if (!ex) throw new BusError(404, `NOT_FOUND - no exchange '${exchange}' in vhost '/'`);
    const keys = [routingKey, ...cc];
    const names = new Set<string>();
    for (const b of ex.bindings) if (!names.has(b.queue) && keys.some((k) => topicMatches(b.pattern, k))) names.add(b.queue);
    return [...names].map((n) => this.queues.get(n)).filter((q): q is Queue => q !== undefined);
  }

  /**
   * A message returned to its queue: back at its head (redelivered) or, past the queue's x-delivery-limit (a quorum
   * queue's, RabbitMQ 3.x: delivered limit + 1 times), dead-lettered to x-dead-letter-exchange with
   * x-dead-letter-routing-key (or dropped without one), as RabbitMQ does.
   */
  giveBack(queue: Queue, stored: Stored): void {
    if (this.queues.get(queue.name) !== queue) return;
    const returns = (stored.returns ?? 0) + 1;
    const limit = queue.arguments['x-delivery-limit'];
    if (typeof limit === 'number' && returns > limit) {
      const exchange = queue.arguments['x-dead-letter-exchange'];
      if (typeof exchange !== 'string' || !this.exchanges.has(exchange)) return;
      const key = queue.arguments['x-dead-letter-routing-key'];
      const routingKey = typeof key === 'string' ? key : stored.routingKey;
      const headers = { ...stored.properties.headers, 'x-first-death-reason': 'delivery_limit', 'x-first-death-queue': queue.name };
      for (const q of this.route(exchange, routingKey, [])) {
        q.ready.push({ exchange, routingKey, content: stored.content, properties: { ...stored.properties, headers }, redelivered: false });
        this.pump(q);
      }
      return;
    }
    const counted = typeof limit === 'number' || queue.arguments['x-queue-type'] === 'quorum';
    const properties = counted ? { ...stored.properties, headers: { ...stored.properties.headers, 'x-delivery-count': returns } } : stored.properties;
    queue.ready.unshift({ ...stored, properties, returns, redelivered: true });
  }

  deleteQueue(queue: Queue): void {
    this.queues.delete(queue.name);
    for (const ex of this.exchanges.values()) ex.bindings = ex.bindings.filter((b) => b.queue !== queue.name);
    for (const c of queue.consumers) {
      c.channel.forgetConsumer(c.tag);
      queueMicrotask(() => c.onMessage(null)); // as RabbitMQ cancels consumers of a deleted queue
    }
    queue.consumers = [];
  }

  /** Delivers ready messages to consumers with room (round-robin), after the current call stack. */
  pump(queue: Queue): void {
    if (queue.pumping) return;
    queue.pumping = true;
    setImmediate(() => {
      queue.pumping = false;
      while (queue.ready.length > 0 && this.queues.get(queue.name) === queue) {
        const consumer = this.nextConsumerWithRoom(queue);
        if (!consumer) return;
        const stored = queue.ready.shift() as Stored;
        consumer.channel.deliver(queue, consumer, stored);
      }
    });
  }

  private nextConsumerWithRoom(queue: Queue): Consumer | undefined {
    const n = queue.consumers.length;
    for (let i = 0; i < n; i++) {
      const c = queue.consumers[(queue.nextConsumer + i) % n];
      if (c.channel.hasRoom()) {
        queue.nextConsumer = (queue.nextConsumer + i + 1) % n;
        return c;
      }
    }
    return undefined;
  }
}

const brokers = new Map<string, Broker>();

class MemoryChannel extends EventEmitter implements BusConfirmChannel {
  private closed = false;
  private prefetchCount = 0;
  private nextTag = 1;
  private readonly unacked = new Map<number, { queue: Queue; stored: Stored }>();
  private readonly consumerTags = new Set<string>();
  /** A confirm channel's refusal, reported by waitForConfirms. */
  private refused: Error | undefined;

  constructor(
    private readonly broker: Broker,
    readonly connection: MemoryConnection,
    private readonly confirm: boolean,
  ) {
    super();
  }

  private check(): void {
    if (this.closed) throw new BusError(504, 'Channel closed');
  }

  /** A channel-level error: the channel closes, as RabbitMQ's would. */
  private fail(err: BusError): never {
    this.shutdown(err);
    throw err;
  }

  async assertExchange(exchange: string, type: 'topic', options: Options.AssertExchange = {}): Promise<{ exchange: string }> {
    this.check();
    const existing = this.broker.exchanges.get(exchange);
    if (existing && existing.type !== type) {
      this.fail(new BusError(406, `PRECONDITION_FAILED - inequivalent arg 'type' for exchange '${exchange}': received '${type}' but current is '${existing.type}'`));
    }
    // RabbitMQ compares one argument of a redeclared exchange: its alternate exchange (a deployment's marker relies on it)
    const alternate = (options.arguments as Record<string, unknown> | undefined)?.['alternate-exchange'];
    if (existing && existing.alternate !== alternate) {
      const shown = (v: unknown) => (v === undefined ? 'none' : `'${String(v)}'`);
      this.fail(
        new BusError(406, `PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange '${exchange}' in vhost '/': received ${shown(alternate)} but current is ${shown(existing.alternate)}`),
      );
    }
    if (!existing) this.broker.exchanges.set(exchange, { type, bindings: [], ...(alternate === undefined ? {} : { alternate }) });
    return { exchange };
  }

  async deleteExchange(exchange: string): Promise<object> {
    this.check();
    this.broker.exchanges.delete(exchange);
    return {};
  }

  async assertQueue(queue = '', options: Options.AssertQueue = {}) {
    this.check();
    const name = queue || `amq.gen-${randomBytes(16).toString('base64url')}`;
    let q = this.broker.queues.get(name);
    if (q?.exclusiveOwner && q.exclusiveOwner !== this.connection) {
      this.fail(new BusError(405, `RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '${name}' in vhost '/'`));
    }
    const args = (options.arguments ?? {}) as Record<string, unknown>;
    if (q) {
      for (const key of EQUIVALENT_ARGS) {
        if (q.arguments[key] === args[key]) continue;
        const shown = (v: unknown, other: unknown) => (v === undefined ? 'none' : other === undefined && typeof v === 'string' ? `the value '${v}' of type 'longstr'` : `'${String(v)}'`);
        this.fail(new BusError(406, `PRECONDITION_FAILED - inequivalent arg '${key}' for queue '${name}' in vhost '/': received ${shown(args[key], q.arguments[key])} but current is ${shown(q.arguments[key], args[key])}`));
      }
    }
    if (!q) {
      q = {
        name,
        exclusiveOwner: options.exclusive ? this.connection : undefined,
        autoDelete: options.autoDelete ?? false,
        arguments: args,
        ready: [],
        consumers: [],
        nextConsumer: 0,
        hadConsumer: false,
        pumping: false,
      };
      this.broker.queues.set(name, q);
      if (q.exclusiveOwner) this.connection.exclusiveQueues.add(name);
    }
    return { queue: name, messageCount: q.ready.length, consumerCount: q.consumers.length };
  }

  async deleteQueue(queue: string): Promise<{ messageCount: number }> {
    this.check();
    const q = this.broker.queues.get(queue);
    if (!q) return { messageCount: 0 };
    this.broker.deleteQueue(q);
    return { messageCount: q.ready.length };
  }

  async bindQueue(queue: string, exchange: string, pattern: string): Promise<object> {
    this.check();
    const ex = this.broker.exchanges.get(exchange);
    if (!ex) this.fail(new BusError(404, `NOT_FOUND - no exchange '${exchange}' in vhost '/'`));
    if (!this.broker.queues.has(queue)) this.fail(new BusError(404, `NOT_FOUND - no queue '${queue}' in vhost '/'`));
    if (!ex.bindings.some((b) => b.queue === queue && b.pattern === pattern)) ex.bindings.push({ queue, pattern });
    return {};
  }

  async unbindQueue(queue: string, exchange: string, pattern: string): Promise<object> {
    this.check();
    const ex = this.broker.exchanges.get(exchange);
    if (ex) ex.bindings = ex.bindings.filter((b) => !(b.queue === queue && b.pattern === pattern));
    return {};
  }

  async prefetch(count: number): Promise<object> {
    this.check();
    this.prefetchCount = count;
    return {};
  }

  publish(exchange: string, routingKey: string, content: Buffer, options: Options.Publish = {}): boolean {
    this.check();
    const cc = options.CC === undefined ? [] : Array.isArray(options.CC) ? options.CC : [options.CC];
    let queues: Queue[];
    try {
      queues = this.broker.route(exchange, routingKey, cc);
    } catch (err) {
      // RabbitMQ answers an unroutable exchange by closing the channel, after the publish returned.
      this.refused = err as Error;
      setImmediate(() => this.shutdown(err as BusError));
      return true;
    }
    const headers = { ...(options.headers ?? {}), ...(cc.length > 0 ? { CC: cc } : {}) };
    const properties = {
      contentType: options.contentType,
      contentEncoding: options.contentEncoding,
      headers,
      deliveryMode: options.persistent ? 2 : options.deliveryMode,
      priority: options.priority,
      correlationId: options.correlationId,
      replyTo: options.replyTo,
      expiration: options.expiration,
      messageId: options.messageId,
      timestamp: options.timestamp,
      type: options.type,
      userId: options.userId,
      appId: options.appId,
      clusterId: undefined,
    } as MessageProperties;
    for (const q of queues) {
      q.ready.push({ exchange, routingKey, content: Buffer.from(content), properties, redelivered: false });
      this.broker.pump(q);
    }
    return true;
  }

  async waitForConfirms(): Promise<void> {
    if (!this.confirm) throw new BusError(406, 'waitForConfirms on a channel that is not in confirm mode');
    // Routing happens at publish time, so every message is taken (or refused) by now.
    await new Promise((r) => setImmediate(r));
    if (this.refused) throw this.refused;
    this.check();
  }

  async consume(queue: string, onMessage: (msg: BusMessage | null) => void, options: Options.Consume = {}): Promise<{ consumerTag: string }> {
    this.check();
    const q = this.broker.queues.get(queue);
    if (!q) this.fail(new BusError(404, `NOT_FOUND - no queue '${queue}' in vhost '/'`));
    const tag = options.consumerTag ?? `amq.ctag-${randomBytes(16).toString('base64url')}`;
    q.consumers.push({ tag, channel: this, onMessage, noAck: options.noAck ?? false });
    q.hadConsumer = true;
    this.consumerTags.add(tag);
    this.broker.pump(q);
    return { consumerTag: tag };
  }

  async cancel(consumerTag: string): Promise<{ consumerTag: string }> {
    this.check();
    this.removeConsumer(consumerTag);
    return { consumerTag };
  }

  forgetConsumer(tag: string): void {
    this.consumerTags.delete(tag);
  }

  private removeConsumer(tag: string): void {
    this.consumerTags.delete(tag);
    for (const q of [...this.broker.queues.values()]) {
      const before = q.consumers.length;
      q.consumers = q.consumers.filter((c) => c.tag !== tag || c.channel !== this);
      if (q.consumers.length < before && q.consumers.length === 0 && q.autoDelete && q.hadConsumer) this.broker.deleteQueue(q);
    }
  }

  hasRoom(): boolean {
    return !this.closed && (this.prefetchCount === 0 || this.unacked.size < this.prefetchCount);
  }

  deliver(queue: Queue, consumer: Consumer, stored: Stored): void {
    const deliveryTag = this.nextTag++;
    if (!consumer.noAck) this.unacked.set(deliveryTag, { queue, stored });
    const msg = {
      content: stored.content,
      fields: { consumerTag: consumer.tag, deliveryTag, redelivered: stored.redelivered, exchange: stored.exchange, routingKey: stored.routingKey },
      properties: stored.properties,
    } as BusMessage;
    try {
      consumer.onMessage(msg);
    } catch (err) {
      logger('bus').error({ err }, 'message bus: a consumer threw');
    }
  }

  private settle(message: Message, allUpTo: boolean, done: (entry: { queue: Queue; stored: Stored }) => void): void {
    this.check();
    const tag = message.fields.deliveryTag;
    if (!this.unacked.has(tag)) this.fail(new BusError(406, `PRECONDITION_FAILED - unknown delivery tag ${tag}`));
    const tags = allUpTo ? [...this.unacked.keys()].filter((t) => t <= tag).sort((a, b) => a - b) : [tag];
    const touched = new Set<Queue>();
    // Requeued messages go back to the head of their queue in their original order.
    for (const t of [...tags].reverse()) {
      const entry = this.unacked.get(t) as { queue: Queue; stored: Stored };
      this.unacked.delete(t);
      done(entry);
      touched.add(entry.queue);
    }
    for (const q of touched) this.broker.pump(q);
    // Room freed on this channel: other queues it consumes may deliver now.
    for (const q of this.broker.queues.values()) if (q.consumers.some((c) => c.channel === this)) this.broker.pump(q);
  }

  ack(message: Message, allUpTo = false): void {
    this.settle(message, allUpTo, () => undefined);
  }

  nack(message: Message, allUpTo = false, requeue = true): void {
    this.settle(message, allUpTo, ({ queue, stored }) => {
      if (requeue) this.broker.giveBack(queue, stored);
    });
  }

  /** Closes the channel: consumers go, unacked messages return to their queues (redelivered). */
  shutdown(err?: BusError): void {
    if (this.closed) return;
    this.closed = true;
    for (const tag of [...this.consumerTags]) this.removeConsumer(tag);
    const entries = [...this.unacked.entries()].sort((a, b) => b[0] - a[0]);
    this.unacked.clear();
    const touched = new Set<Queue>();
    for (const [, { queue, stored }] of entries) {
      this.broker.giveBack(queue, stored);
      touched.add(queue);
    }
    for (const q of touched) this.broker.pump(q);
    this.connection.channels.delete(this);
    if (err && this.listenerCount('error') > 0) this.emit('error', err);
    this.emit('close');
  }

  async close(): Promise<void> {
    this.check();
    this.shutdown();
  }
}

class MemoryConnection extends EventEmitter implements BusConnection {
  readonly channels = new Set<MemoryChannel>();
  readonly exclusiveQueues = new Set<string>();
  private closed = false;

  constructor(private readonly broker: Broker) {
    super();
  }

  private open(confirm: boolean): MemoryChannel {
    if (this.closed) throw new BusError(504, 'Connection closed');
    const ch = new MemoryChannel(this.broker, this, confirm);
    this.channels.add(ch);
    return ch;
  }

  async createChannel(): Promise<BusChannel> {
    return this.open(false);
  }

  async createConfirmChannel(): Promise<BusConfirmChannel> {
    return this.open(true);
  }

  async close(): Promise<void> {
    if (this.closed) throw new BusError(504, 'Connection closed');
    this.closed = true;
    for (const ch of [...this.channels]) ch.shutdown();
    for (const name of this.exclusiveQueues) {
      const q = this.broker.queues.get(name);
      if (q?.exclusiveOwner === this) this.broker.deleteQueue(q);
    }
    this.emit('close');
  }
}

/** A connection to the in-process bus named by `memory://<name>` (created on first use, kept for the process). */
export async function connectMemoryBus(url: string): Promise<BusConnection> {
  const name = url.slice(SCHEME.length);
  let broker = brokers.get(name);
  if (!broker) {
    broker = new Broker();
    brokers.set(name, broker);
  }
  return new MemoryConnection(broker);
}
