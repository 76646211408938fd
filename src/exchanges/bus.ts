import { Writable } from 'node:stream';
import amqp, { type SocketOptions } from 'amqplib';
import { connectMemoryBus, isMemoryBusUrl } from './busMemory.js';
import type { BusChannel, BusConnection } from './busTypes.js';

/**
 * The message bus the relay publishes to and the bridge (and tests) consume from: the subset of AMQP
 * 0-9-1 tgs uses, with RabbitMQ's topic-exchange semantics. Two implementations:
 * - RabbitMQ (`amqp://` / `amqps://` URLs): amqplib's connection, unchanged;
 * - in-process (`memory://<name>` URLs, src/exchanges/busMemory.ts): `tgs dev` without AMQP_URL.
 */
export type { BusMessage, BusChannel, BusConfirmChannel, BusConnection } from './busTypes.js';

/**
 * The nodes of an `AMQP_URL`: one URL, or several separated by commas (the nodes of one RabbitMQ cluster, each with
 * its credentials: `amqp://u:p@h1:5672,amqp://u:p@h2:5672`).
 */
export function busNodes(url: string): string[] {
  const nodes = url.split(',').map((u) => u.trim()).filter((u) => u !== '');
  return nodes.length > 0 ? nodes : [url];
}

/** A bus URL (or list of them) to print: each without its password. */
export function safeBusUrl(url: string): string {
  return busNodes(url).map(safeNodeUrl).join(',');
}

function safeNodeUrl(url: string): string {
  try {
    const u = new URL(url);
    if (u.password) u.password = '***';
    return u.toString().replace(/\/$/, '');
  } catch {
    // not a URL: print nothing of it that could be a secret
    return '(unparsable URL)';
  }
}

/** A node as logs name it: scheme, host and port, no credentials nor vhost. */
export function busNodeName(url: string): string {
  try {
    const u = new URL(url);
    return `${u.protocol}//${u.host}`;
  } catch {
    return '(unparsable URL)';
  }
}

/** How long a connection attempt to one node of several may take before the next node is tried. */
const NODE_CONNECT_TIMEOUT_MS = 5000;

/**
 * Connects to the bus of `url`: RabbitMQ for amqp(s) URLs, the in-process bus for `memory://<name>`. With several
 * nodes it tries them in turn, starting with the one after `after` (the node a lost connection was on, so a process
 * moves on instead of knocking at a node that just went away; the lost node is tried last) or with `first`, and
 * fails only if every
 * node does, naming each node's error. The connection's `node` says which it reached.
 */
/** What logs call the bus of `url`: `RabbitMQ`, or `the in-process bus` (tgs dev without AMQP_URL has no RabbitMQ). */
export function busLabel(url: string): string {
  return isMemoryBusUrl(url) ? 'the in-process bus' : 'RabbitMQ';
}

export async function connectBus(url: string, options: { connectionName?: string; after?: string; first?: string } = {}): Promise<BusConnection> {
  if (isMemoryBusUrl(url)) return Object.assign(await connectMemoryBus(url), { node: url });
  const nodes = busNodes(url);
  // `first`: a node that answered lately (the heartbeat's), tried first; `after`: a node just lost, tried last
  const preferred = options.first === undefined ? -1 : nodes.findIndex((n) => busNodeName(n) === options.first);
  const lost = preferred >= 0 ? preferred - 1 : options.after === undefined ? -1 : nodes.findIndex((n) => busNodeName(n) === options.after);
  const order = nodes.map((_, k) => nodes[(lost + 1 + k + nodes.length) % nodes.length]);
  const errors: string[] = [];
  for (const node of order) {
    try {
      return await connectNode(node, options.connectionName, nodes.length > 1);
    } catch (err) {
      if (nodes.length === 1) throw err;
      errors.push(`${busNodeName(node)}: ${(err as Error).message}`);
    }
  }
  throw new Error(`no RabbitMQ node answered (${errors.join('; ')})`);
}

async function connectNode(url: string, connectionName: string | undefined, timeout: boolean): Promise<BusConnection> {
  // amqplib hands these to net.connect / tls.connect, whose sockets take a stream's options too
  const socketOptions: SocketOptions & { writableHighWaterMark: number; timeout?: number } = {
    ...(connectionName ? { clientProperties: { connection_name: connectionName } } : {}),
    // a batch sent together (sendTogether) is buffered whole before its one write; past this the socket
    // says it is full and amqplib writes the rest a message at a time (the default 16 KB held ~50 messages)
    writableHighWaterMark: PUBLISH_BATCH_BYTES,
    // one silent node must not keep a process from the others
    ...(timeout ? { timeout: NODE_CONNECT_TIMEOUT_MS } : {}),
  };
  const connection = await amqp.connect(url, socketOptions);
  return Object.assign(connection, { node: busNodeName(url) });
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
