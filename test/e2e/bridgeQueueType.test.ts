import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { spawnSync } from 'node:child_process';
import { loadConfig } from '../../src/config.js';
import { bridgeDeadLetterName, BridgeQueueMismatchError } from '../../src/bridge/bridgeQueue.js';
import { startBridgeConsumer } from '../../src/bridge/consumer.js';
import { bridgeQueueName } from '../../src/bridge/messages.js';
import { connectBus } from '../../src/exchanges/bus.js';

// The bridge queue's type against the real RabbitMQ: declared quorum by default (with its dead-letter queue), and a
// bridge meeting an earlier bridge's classic queue refuses to start, saying what to do.
const prefix = `test-${randomBytes(4).toString('hex')}/`;
const cleanup: (() => Promise<unknown>)[] = [];
after(async () => {
  for (const step of cleanup) await step().catch(() => undefined);
});

const start = (config: ReturnType<typeof loadConfig>, depths: number[] = []) =>
  startBridgeConsumer({ config, queueName: bridgeQueueName(config), log: () => undefined, prefetch: 10, onMessage: () => undefined, onLost: () => undefined, onDeadLetterDepth: (n) => depths.push(n) });

async function withChannel<T>(fn: (ch: Awaited<ReturnType<Awaited<ReturnType<typeof connectBus>>['createChannel']>>) => Promise<T>): Promise<T> {
  const conn = await connectBus(loadConfig({}).amqpUrl);
  conn.on('error', () => undefined);
  try {
    const ch = await conn.createChannel();
    ch.on('error', () => undefined);
    return await fn(ch);
  } finally {
    await conn.close().catch(() => undefined);
  }
}

test('by default the bridge queue is a quorum queue whose dead-letter queue the bridge reads', async () => {
  const config = loadConfig({}, { exchangePrefix: prefix, schedulerId: 'quorum' });
  cleanup.push(() => withChannel(async (ch) => {
    await ch.deleteQueue(bridgeQueueName(config));
    await ch.deleteQueue(bridgeDeadLetterName(config));
    await ch.deleteExchange(bridgeDeadLetterName(config));
  }));
  const depths: number[] = [];
  const consumer = await start(config, depths);
  try {
    assert.ok(consumer.channel);
    const listed = JSON.parse(spawnSync('rabbitmqctl', ['list_queues', 'name', 'type', 'arguments', '--formatter', 'json'], { encoding: 'utf8' }).stdout) as { name: string; type: string }[];
    assert.equal(listed.find((q) => q.name === bridgeQueueName(config))?.type, 'quorum');
    assert.equal(listed.find((q) => q.name === bridgeDeadLetterName(config))?.type, 'quorum');
    for (let k = 0; k < 50 && depths.length === 0; k++) await new Promise((r) => setTimeout(r, 20));
    assert.deepEqual(depths, [0], 'the dead-letter queue exists and is empty');
  } finally {
    await consumer.stop();
  }
});

test("a classic queue of an earlier bridge: the quorum bridge refuses to start and says how to go on; TGS_BRIDGE_QUEUE_TYPE=classic uses it", async () => {
  const config = loadConfig({}, { exchangePrefix: prefix, schedulerId: 'classic' });
  const queue = bridgeQueueName(config);
  cleanup.push(() => withChannel(async (ch) => {
    await ch.deleteQueue(queue);
    await ch.deleteQueue(bridgeDeadLetterName(config));
    await ch.deleteExchange(bridgeDeadLetterName(config));
  }));
  await withChannel((ch) => ch.assertQueue(queue, { durable: true }));
  await assert.rejects(start(config), (err: Error) => {
    assert.ok(err instanceof BridgeQueueMismatchError, String(err));
    assert.match(err.message, new RegExp(`RabbitMQ refused to declare ${queue} as a quorum queue: it exists as a classic queue`));
    assert.match(err.message, /set TGS_BRIDGE_QUEUE_TYPE=classic to keep using it/);
    assert.match(err.message, /rabbitmqctl delete_queue/);
    return true;
  });
  const classic = await start(loadConfig({ TGS_BRIDGE_QUEUE_TYPE: 'classic' }, { exchangePrefix: prefix, schedulerId: 'classic' }));
  assert.ok(classic.channel, 'consumes the classic queue');
  await classic.stop();
});
