import { test, before, after, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';
import { loadConfig, type Config } from '../../src/config.js';
import { enqueueMessages } from '../../src/exchanges/outbox.js';
import { startRelay } from '../../src/exchanges/relay.js';
import { queueExchangeName } from '../../src/exchanges/exchanges.js';
import { eventually } from '../../support/stack.js';

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

/** Stops the relay when the test ends, passed or failed: a relay left running would keep the file from exiting. */
function stopAfter<R extends { stop(): Promise<void> }>(t: TestContext, relay: R): R {
  t.after(() => relay.stop());
  return relay;
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

test('every outbox message reaches RabbitMQ even when the broker closes the relay connection mid-run', async (t) => {
  const { name, exchange } = await durableQueue('#');
  const connectionName = `relay-test-${randomBytes(4).toString('hex')}`;
  const relay = stopAfter(t, await startRelay({ config, pool: db.pool, log: () => undefined, connectionName }));
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

test('only one relay publishes at a time; the standby takes over when the active one stops', async (t) => {
  const a = stopAfter(t, await startRelay({ config, pool: db.pool, log: () => undefined }));
  await eventually(async () => a.stats.active, 'first relay active');
  const b = stopAfter(t, await startRelay({ config, pool: db.pool, log: () => undefined }));
  await new Promise((r) => setTimeout(r, 1500));
  assert.equal(b.stats.active, false, 'the second relay stands by');
  await a.stop();
  await eventually(async () => b.stats.active, 'standby takes over', 10_000);
  await enqueueMessages(db.pool, [{ exchange: queueExchangeName(config.exchangePrefix, 'task-completed'), routingKey: 'x', payload: {} }]);
  await eventually(async () => b.stats.published === 1, 'standby publishes');
  await b.stop();
});

test('a relay whose lock session is killed stops publishing, the standby takes over, and only the batch in flight goes out twice', async (t) => {
  const { name, exchange } = await durableQueue('#');
  const logA: string[] = [];
  const a = stopAfter(t, await startRelay({ config, pool: db.pool, log: (line) => logA.push(line) }));
  await eventually(async () => a.stats.active, 'first relay active');
  const b = stopAfter(t, await startRelay({ config, pool: db.pool, log: () => undefined }));
  const total = 4000;
  let written = 0;
  let writerStopped = false;
  t.after(() => {
    writerStopped = true;
  });
  // Rows keep arriving while the lock moves, so both relays would have work if both thought they were active.
  const writer = (async () => {
    while (written < total && !writerStopped) {
      await enqueueMessages(
        db.pool,
        Array.from({ length: 100 }, (_, k) => ({ exchange, routingKey: `task${written + k}.0._._.p.w.s.g._`, payload: {}, messageId: `f-${written + k}` })),
      );
      written += 100;
      await new Promise((r) => setTimeout(r, 20));
    }
  })();
  await eventually(async () => a.stats.published > 0, 'first relay publishing');
  const { rows } = await db.pool.query<{ pid: number }>(
    `SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
       AND (classid::text::bigint << 32) + objid::text::bigint = 7471020232`,
  );
  assert.equal(rows.length, 1, 'one session holds the relay lock');
  await db.pool.query('SELECT pg_terminate_backend($1)', [rows[0].pid]);
  await eventually(async () => logA.some((l) => l.includes('lost the relay lock session')), 'the first relay notices it lost the lock', 15_000);
  const batchesOfAAtLoss = a.stats.batches;
  await eventually(async () => b.stats.active, 'the standby takes over', 30_000);
  await writer;
  await eventually(async () => Number((await db.pool.query('SELECT count(*) AS n FROM outbox')).rows[0].n) === 0, 'outbox drained', 60_000);
  assert.ok(a.stats.batches - batchesOfAAtLoss <= 1, 'the relay that lost its lock finished at most the batch in flight, and published nothing more');
  assert.equal(a.stats.active, false, 'and stands by while the other one holds the lock');
  assert.equal(logA.filter((l) => l.includes('lost the relay lock session')).length, 1, 'the loss is logged once');

  const seen = new Map<string, number>();
  const conn = await amqp.connect(config.amqpUrl);
  const ch = await conn.createChannel();
  for (;;) {
    const m = await ch.get(name, { noAck: true });
    if (!m) break;
    seen.set(m.properties.messageId as string, (seen.get(m.properties.messageId as string) ?? 0) + 1);
  }
  await ch.deleteQueue(name);
  await conn.close();
  const missing = Array.from({ length: total }, (_, i) => `f-${i}`).filter((id) => !seen.has(id));
  assert.deepEqual(missing, [], 'no message lost');
  const twice = [...seen.values()].filter((n) => n > 1).length;
  assert.ok(twice <= 500, `at most one batch (500) published twice, got ${twice}`);

  // The first relay competes for the lock again: it is active once the other lets go.
  await b.stop();
  await eventually(async () => a.stats.active, 'the first relay becomes active again', 10_000);
  await a.stop();
});
