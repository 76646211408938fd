import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { loadConfig } from '../../src/config.js';
import { connectBus, memoryBusUrl, sendTogether, type BusChannel, type BusConfirmChannel, type BusMessage } from '../../src/exchanges/bus.js';
import { eventually } from '../../support/stack.js';

const config = loadConfig({});

/** Counts the writes the channel's socket hands the kernel (one `_write` per buffer, one `_writev` per corked batch). */
function countWrites(ch: BusChannel) {
  const socket = (ch as unknown as { connection: { stream: Socket } }).connection.stream;
  const counts = { calls: 0 };
  for (const method of ['_write', '_writev'] as const) {
    const original = socket[method] as (...args: unknown[]) => void;
    (socket as unknown as Record<string, unknown>)[method] = function (this: Socket, ...args: unknown[]) {
      counts.calls++;
      return original.apply(this, args);
    };
  }
  return counts;
}

async function publishBatch(ch: BusConfirmChannel, exchange: string, from: number, together: boolean) {
  const publishAll = () => {
    for (let i = from; i < from + 300; i++) ch.publish(exchange, 'k', Buffer.from(JSON.stringify({ i })), { persistent: true, messageId: `m${i}` });
  };
  if (together) sendTogether(ch, publishAll);
  else publishAll();
  await ch.waitForConfirms();
}

test('a batch published together reaches RabbitMQ in a few socket writes instead of one a message, whole and in order; so do acks', async () => {
  const connection = await connectBus(config.amqpUrl);
  try {
    const ch = await connection.createConfirmChannel();
    const name = `tgs-test-bus-${randomBytes(4).toString('hex')}`;
    await ch.assertExchange(name, 'topic', { durable: false, autoDelete: true });
    await ch.assertQueue(name, { durable: false, autoDelete: true });
    await ch.bindQueue(name, name, '#');
    const writes = countWrites(ch);
    await publishBatch(ch, name, 0, false);
    const apart = writes.calls;
    writes.calls = 0;
    await publishBatch(ch, name, 300, true);
    const together = writes.calls;
    // amqplib writes each message by itself: 300 (the confirm-select and bind went before the count)
    assert.ok(apart >= 300, `published one by one: ${apart} writes`);
    assert.ok(together <= 5, `published together: ${together} writes`);
    const got: BusMessage[] = [];
    const reader = await connection.createChannel();
    await reader.consume(name, (msg) => msg && got.push(msg), { noAck: false });
    await eventually(async () => got.length === 600, `600 messages (got ${got.length})`);
    assert.deepEqual(got.map((m) => JSON.parse(m.content.toString()).i), Array.from({ length: 600 }, (_, i) => i));
    // acknowledgements one by one (the bridge settles each message of a flush) go out together as well
    const acks = countWrites(reader);
    sendTogether(reader, () => {
      for (const m of got) reader.ack(m);
    });
    // an RPC on the same channel answers after the acks before it; a message left unacked would be requeued at close
    await reader.prefetch(10);
    assert.ok(acks.calls <= 5, `600 acks: ${acks.calls} writes`);
    await reader.close();
    assert.equal((await ch.assertQueue(name, { durable: false, autoDelete: true })).messageCount, 0);
  } finally {
    await connection.close();
  }
});

test('the in-process bus publishes a batch together as it publishes any other', async () => {
  const connection = await connectBus(memoryBusUrl(`bus-test-${randomBytes(4).toString('hex')}`));
  try {
    const ch = await connection.createConfirmChannel();
    await ch.assertExchange('x', 'topic');
    const { queue } = await ch.assertQueue('');
    await ch.bindQueue(queue, 'x', '#');
    const got: number[] = [];
    await ch.consume(queue, (msg) => msg && got.push(JSON.parse(msg.content.toString()).i), { noAck: true });
    await publishBatch(ch, 'x', 0, true);
    await eventually(async () => got.length === 300, `300 messages (got ${got.length})`);
    assert.deepEqual(got, Array.from({ length: 300 }, (_, i) => i));
  } finally {
    await connection.close();
  }
});
