import type { ConsumeMessage, Message, Options } from 'amqplib';

/**
 * The port both buses implement (src/exchanges/bus.ts picks one by URL): the subset of AMQP 0-9-1 tgs uses, with
 * RabbitMQ's topic-exchange semantics. amqplib's connection is one implementation, src/exchanges/busMemory.ts the
 * other.
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
  /** The node this connection reached, without credentials (`amqp://h2:5672`; the `memory://` URL itself). */
  node?: string;
  createChannel(): Promise<BusChannel>;
  createConfirmChannel(): Promise<BusConfirmChannel>;
  on(event: 'error', listener: (err: Error) => void): unknown;
  on(event: 'close', listener: (err?: Error) => void): unknown;
  close(): Promise<void>;
}

