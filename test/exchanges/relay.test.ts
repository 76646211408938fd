import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import { createTestDatabase, type TestDatabase } from '../helpers/db.js';
import { loadConfig, type Config } from '../../src/config.js';
import { enqueueMessages } from '../../src/exchanges/outbox.js';
import { startRelay } from '../../src/exchanges/relay.js';
import { queueExchangeName } from '../../src/exchanges/exchanges.js';
import { eventually } from '../helpers/stack.js';

let db: TestDatabase;
let config: Config;
before(async () => {
  db = await createTestDatabase();
  config = loadConfig({}, { databaseUrl: db.url, exchangePrefix: `test-${randomBytes(4).toString('hex')}/` });
});
after(async () => {
  await db.drop();
});

/** A durable queue bound to one exchange: messages published while we are disconnected wait in it. */
async function durableQueue(pattern: string) {
  const name = `${config.exchangePrefix}relay-test`;
  const exchange = queueExchangeName(config.exchangePrefix, 'task-completed');
  const conn = await amqp.connect(config.amqpUrl);
  const ch = await conn.createChannel();
  await ch.assertExchange(exchange, 'topic', { durable: true });
  await ch.assertQueue(name, { durable: true });
  await ch.bindQueue(name, exchange, pattern);
  await conn.close();
  return { name, exchange };
}

async function drain(queue: string, into: Map<string, string>) {
  const conn = await amqp.connect(config.amqpUrl);
  const ch = await conn.createChannel();
  for (;;) {
    const m = await ch.get(queue, { noAck: true });
    if (!m) break;
    into.set(m.properties.messageId as string, m.fields.routingKey);
  }
  await conn.close();
}

test('every outbox message reaches RabbitMQ even when the broker closes the relay connection mid-run', async () => {
  const { name, exchange } = await durableQueue('#');
  const connectionName = `relay-test-${randomBytes(4).toString('hex')}`;
  const relay = await startRelay({ config, pool: db.pool, log: () => undefined, connectionName });
  const total = 3000;
  const write = async (from: number, to: number) => {
    for (let i = from; i < to; i += 100) {
      await enqueueMessages(
        db.pool,
        Array.from({ length: Math.min(100, to - i) }, (_, k) => ({
          exchange,
          routingKey: `task${i + k}.0._._.p.w.s.g._`,
          payload: { n: i + k },
          messageId: `m-${i + k}`,
        })),
      );
    }
  };
  await write(0, total / 2);
  await eventually(async () => relay.stats.published > 200, 'relay publishing');
  // The broker closes the relay's connection while rows are still being sent (other test files' connections are left alone).
  const listing = execFileSync('rabbitmqctl', ['list_connections', '--silent', 'pid', 'client_properties'], { encoding: 'utf8' });
  const pid = listing.split('\n').find((line) => line.includes(connectionName))?.split('\t')[0];
  assert.ok(pid, `relay connection ${connectionName} found`);
  execFileSync('rabbitmqctl', ['close_connection', pid, 'relay test: simulated broker failure'], { stdio: 'ignore' });
  await write(total / 2, total);
  await eventually(async () => Number((await db.pool.query('SELECT count(*) AS n FROM outbox')).rows[0].n) === 0, 'outbox drained', 60_000);
  assert.ok(relay.stats.connections >= 2, 'the relay lost its connection and made a new one');
  await relay.stop();
  const seen = new Map<string, string>();
  await drain(name, seen);
  const missing = Array.from({ length: total }, (_, i) => `m-${i}`).filter((id) => !seen.has(id));
  assert.deepEqual(missing, [], 'no message lost');
  assert.equal(seen.get('m-42'), 'task42.0._._.p.w.s.g._');
  const conn = await amqp.connect(config.amqpUrl);
  await (await conn.createChannel()).deleteQueue(name);
  await conn.close();
});

test('only one relay publishes at a time; the standby takes over when the active one stops', async () => {
  const a = await startRelay({ config, pool: db.pool, log: () => undefined });
  await eventually(async () => a.stats.active, 'first relay active');
  const b = await startRelay({ config, pool: db.pool, log: () => undefined });
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(b.stats.active, false, 'the second relay stands by');
  await a.stop();
  await eventually(async () => b.stats.active, 'standby takes over', 10_000);
  await enqueueMessages(db.pool, [{ exchange: queueExchangeName(config.exchangePrefix, 'task-completed'), routingKey: 'x', payload: {} }]);
  await eventually(async () => b.stats.published === 1, 'standby publishes');
  await b.stop();
});
