import { Writable } from 'node:stream';
import amqp, { type ConsumeMessage, type Message, type Options, type SocketOptions } from 'amqplib';
import { connectMemoryBus, isMemoryBusUrl } from './busMemory.js';

/**
 * The message bus the relay publishes to and the bridge (and tests) consume from: the subset of AMQP
 * 0-9-1 tgs uses, with RabbitMQ's topic-exchange semantics. Two implementations:
 * - RabbitMQ (`amqp://` / `amqps://` URLs): amqplib's connection, unchanged;
 * - in-process (`memory://<name>` URLs, src/exchanges/busMemory.ts): `tgs dev` without AMQP_URL.
 */
export type BusMessage = ConsumeMessage;

export interface BusChannel {
  assertExchange(exchange: string, type: 'topic', options?: Options.AssertExchange): Promise<unknown>;
  deleteExchange(exchange: string): Promise<unknown>;
  /** An empty name makes the broker generate one (returned in `queue`). */
  assertQueue(queue?: string, options?: Options.AssertQueue): Promise<{ queue: string; messageCount: number; consumerCount: number }>;
  deleteQueue(queue: string): Promise<unknown>;
  bindQueue(queue: string, exchange: string, pattern: string): Promise<unknown>;
  unbindQueue(queue: string, exchange: string, pattern: string): Promise<unknown>;
  prefetch(count: number): Promise<unknown>;
  /** `options.CC`: more routing keys (RabbitMQ's sender-selected distribution); `messageId` is kept. */
  publish(exchange: string, routingKey: string, content: Buffer, options?: Options.Publish): boolean;
  consume(queue: string, onMessage: (msg: BusMessage | null) => void, options?: Options.Consume): Promise<{ consumerTag: string }>;
  cancel(consumerTag: string): Promise<unknown>;
  ack(message: Message, allUpTo?: boolean): void;
  nack(message: Message, allUpTo?: boolean, requeue?: boolean): void;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'close', listener: () => void): unknown;
  close(): Promise<void>;
}

export interface BusConfirmChannel extends BusChannel {
  /** Resolves once the broker has taken every message published so far; rejects if it refused one. */
  waitForConfirms(): Promise<void>;
}

export interface BusConnection {
  createChannel(): Promise<BusChannel>;
  createConfirmChannel(): Promise<BusConfirmChannel>;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'close', listener: (err?: Error) => void): unknown;
  close(): Promise<void>;
}

/** Connects to the bus of `url`: RabbitMQ for amqp(s) URLs, the in-process bus for `memory://<name>`. */
export async function connectBus(url: string, options: { connectionName?: string } = {}): Promise<BusConnection> {
  if (isMemoryBusUrl(url)) return connectMemoryBus(url);
  // amqplib hands these to net.connect / tls.connect, whose sockets take a stream's options too
  const socketOptions: SocketOptions & { writableHighWaterMark: number } = {
    ...(options.connectionName ? { clientProperties: { connection_name: options.connectionName } } : {}),
    // a batch sent together (sendTogether) is buffered whole before its one write; past this the socket
    // says it is full and amqplib writes the rest a message at a time (the default 16 KB held ~50 messages)
    writableHighWaterMark: PUBLISH_BATCH_BYTES,
  };
  return amqp.connect(url, socketOptions);
}

/** What a connection's socket buffers before it asks its writer to wait: a relay batch of 500 messages, ~750 KB. */
const PUBLISH_BATCH_BYTES = 1 << 20;

/** The socket under an amqplib channel (its connection's stream); none for the in-process bus. */
function socketOf(ch: BusChannel): Writable | undefined {
  const stream = (ch as { connection?: { stream?: unknown } }).connection?.stream;
  return stream instanceof Writable ? stream : undefined;
}

/**
 * Runs `send`, which publishes or acknowledges on `ch`, so that what it sends reaches the socket in one write.
 * amqplib queues each message or ack as its own buffer and hands them to the socket one `write` each on the next
 * turn of the event loop (its Mux writes from setImmediate): a relay batch of 500 messages was 500 write syscalls
 * and as many TCP segments for RabbitMQ to read (strace of the relay over a 10,000-task graph: 15,760 writes and
 * 65 writevs in 5 s; 67 writes and 145 writevs with this). The socket is corked while `send` runs and uncorked on
 * the turn after, so those writes leave as one writev. Nothing waits on it: if amqplib writes later than that (its
 * socket full), the rest goes out uncorked, only not coalesced.
 */
export function sendTogether(ch: BusChannel, send: () => void): void {
  const socket = socketOf(ch);
  if (!socket) return send();
  socket.cork();
  try {
    send();
  } finally {
    // this turn's immediates include amqplib's write of the batch (scheduled from the nextTick its first buffer
    // queued, after this one); the turn after, the batch is in the socket's buffer
    setImmediate(() => setImmediate(() => socket.uncork()));
  }
}

export { isMemoryBusUrl, memoryBusUrl } from './busMemory.js';
