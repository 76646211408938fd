import { test, before, after, type TestContext } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import amqp from 'amqplib';
import pg from 'pg';
import { insertPendingTasks, outboxCount as countOutbox, type TestDatabase } from '../../support/db.js';
import { loadConfig, type Config } from '../../src/config.js';
import { enqueueMessages, type OutboxMessage } from '../../src/exchanges/outbox.js';
import { startRelay } from '../../src/relay/relay.js';
import { queueExchangeName } from '../../src/exchanges/exchanges.js';
import { connectBus, memoryBusUrl } from '../../src/exchanges/bus.js';
import { createPool, withTransaction } from '../../src/db/pool.js';
import { pgliteUrl } from '../../src/db/pglite.js';
import { migrate } from '../../src/db/migrate.js';
import { eventually } from '../../support/stack.js';
import { testIssuer } from '../../support/issuer.js';
import { claimPending } from '../../src/queue/claimWork.js';
import { taskMessage } from '../../src/queue/messages.js';
import { loadTask, TASK_COLUMNS } from '../../src/queue/taskRow.js';
import { deferredDefinedInsert } from '../../src/scheduler/announceDefined.js';
import { observeRelay, registry } from '../../src/observability/metrics.js';
import { relayTestDatabase } from '../helpers/outbox.js';

let db: TestDatabase;
let config: Config;
before(async () => ({ db, config } = await relayTestDatabase()));
after(() => db.drop());

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
  const relay = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: () => undefined, connectionName }));
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
  await eventually(async () => (await outboxCount()) === 0, 'outbox drained', 60_000);
  assert.ok(relay.stats.connections >= 2, 'the relay lost its connection and made a new one');
  assert.equal(relay.stats.deadLettered, 0, 'a lost connection sets nothing aside');
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
  const a = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: () => undefined }));
  await eventually(async () => a.stats.active, 'first relay active');
  const b = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: () => undefined }));
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
  const a = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: (line) => logA.push(line) }));
  await eventually(async () => a.stats.active, 'first relay active');
  const b = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: () => undefined }));
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
  await eventually(async () => (await outboxCount()) === 0, 'outbox drained', 60_000);
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

/** The messages in the test's durable queue: messageId → how many times it arrived. */
async function drainCounts(queue: string): Promise<Map<string, number>> {
  const seen = new Map<string, number>();
  const conn = await amqp.connect(config.amqpUrl);
  const ch = await conn.createChannel();
  for (;;) {
    const m = await ch.get(queue, { noAck: true });
    if (!m) break;
    const id = m.properties.messageId as string;
    seen.set(id, (seen.get(id) ?? 0) + 1);
  }
  await ch.deleteQueue(queue);
  await conn.close();
  return seen;
}

const outboxCount = () => countOutbox(db.pool);

/** A transaction on its own connection that writes outbox rows and stays open until the test ends it. */
async function openTransaction(t: TestContext) {
  const client = new pg.Client({ connectionString: db.url });
  await client.connect();
  t.after(() => client.end().catch(() => undefined));
  await client.query('BEGIN');
  return client;
}

test('a row whose transaction commits after later rows were read and published is published when it commits', async (t) => {
  const { name, exchange } = await durableQueue('#');
  const message = (id: string): OutboxMessage => ({ exchange, routingKey: `${id}.0._._.p.w.s.g._`, payload: {}, messageId: id });
  const relay = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: () => undefined }));
  await eventually(async () => relay.stats.active, 'relay active');
  const late = await openTransaction(t);
  await enqueueMessages(late, [message('late-0'), message('late-1')]);
  for (let i = 0; i < 3; i++) await enqueueMessages(db.pool, [message(`after-${i}`)]);
  // (The open transaction's rows are invisible to this count.)
  await eventually(async () => relay.stats.published >= 3 && (await outboxCount()) === 0, 'the later rows published');
  assert.ok(relay.stats.gaps >= 1, 'the cursor passed the ids of the open transaction: a gap');
  // Long enough for the gap to be armed and checked several times: the open transaction holds xmin below it.
  await new Promise((r) => setTimeout(r, 3000));
  assert.ok(relay.stats.gaps >= 1, 'the gap stays while its transaction runs');
  await late.query('COMMIT');
  await enqueueMessages(db.pool, [message('after-3')]);
  await eventually(async () => (await outboxCount()) === 0, 'the late rows published', 15_000);
  await eventually(async () => relay.stats.gaps === 0, 'no gap left', 30_000);
  await relay.stop();
  const seen = await drainCounts(name);
  for (const id of ['late-0', 'late-1', 'after-0', 'after-1', 'after-2', 'after-3']) assert.equal(seen.get(id), 1, `${id} published once`);
});

test('the ids of a rolled-back transaction are dropped from the gaps once it has certainly ended', async (t) => {
  const { name, exchange } = await durableQueue('#');
  const message = (id: string): OutboxMessage => ({ exchange, routingKey: `${id}.0._._.p.w.s.g._`, payload: {}, messageId: id });
  const relay = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: () => undefined }));
  await eventually(async () => relay.stats.active, 'relay active');
  const doomed = await openTransaction(t);
  await enqueueMessages(doomed, [message('rolled-back')]);
  await enqueueMessages(db.pool, [message('kept-0')]);
  await eventually(async () => relay.stats.published >= 1 && relay.stats.gaps >= 1, 'the later row published, a gap below it');
  await doomed.query('ROLLBACK');
  // The gap goes after GAP_ARM_MS and a snapshot whose xmin passed the horizon: a few reads (one a second).
  await eventually(async () => relay.stats.gaps === 0, 'the gap dropped', 30_000);
  await enqueueMessages(db.pool, [message('kept-1')]);
  await eventually(async () => (await outboxCount()) === 0, 'later rows still published');
  await relay.stop();
  const seen = await drainCounts(name);
  assert.equal(seen.get('kept-0'), 1);
  assert.equal(seen.get('kept-1'), 1);
  assert.equal(seen.has('rolled-back'), false);
});

test('with an outbox sequence that caches ids the relay says so and reads the whole outbox every time, losing nothing', async (t) => {
  const { name, exchange } = await durableQueue('#');
  const message = (id: string): OutboxMessage => ({ exchange, routingKey: `${id}.0._._.p.w.s.g._`, payload: {}, messageId: id });
  await db.pool.query('ALTER SEQUENCE outbox_id_seq CACHE 20');
  t.after(() => db.pool.query('ALTER SEQUENCE outbox_id_seq CACHE 1'));
  const lines: string[] = [];
  const relay = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: (line) => lines.push(line) }));
  await eventually(async () => lines.some((l) => l.includes('has CACHE 20')), 'the relay reports the cache');
  // Two sessions, two blocks of 20 ids: the first session's next id is below the second one's.
  const a = await openTransaction(t);
  await a.query('COMMIT');
  const b = await openTransaction(t);
  await b.query('COMMIT');
  await enqueueMessages(a, [message('a-0')]);
  await enqueueMessages(b, [message('b-0')]);
  await eventually(async () => relay.stats.published === 2, 'the first two published');
  // Long enough for a cursor to have dropped the ids between them (nothing was running).
  await new Promise((r) => setTimeout(r, 2500));
  await enqueueMessages(a, [message('a-1')]);
  await eventually(async () => relay.stats.published === 3 && (await outboxCount()) === 0, 'the lower id published too');
  await relay.stop();
  const seen = await drainCounts(name);
  assert.deepEqual([...seen.keys()].sort(), ['a-0', 'a-1', 'b-0']);
});

test('under load the relay reads at most every 20 ms; a lone message after a lone message goes out at once', async (t) => {
  const exchange = queueExchangeName(config.exchangePrefix, 'task-completed');
  const relay = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: () => undefined }));
  const message = (id: string): OutboxMessage => ({ exchange, routingKey: `${id}.0._._.p.w.s.g._`, payload: {}, messageId: id });
  /** ms from writing `messages` until the relay has published them all (polled every ms) */
  const publish = async (messages: OutboxMessage[]) => {
    const target = relay.stats.published + messages.length;
    const startedAt = performance.now();
    await enqueueMessages(db.pool, messages);
    while (relay.stats.published < target) await new Promise((r) => setTimeout(r, 1));
    return performance.now() - startedAt;
  };
  await publish([message('warm-0')]);
  // A batch of 50 (a loaded batch, under the 500 that means a backlog), then, once it is out, one message: the read
  // that finds it starts 20 ms after the loaded batch's read began at the soonest, which was after the 50 were written.
  const spacedBefore = relay.stats.spacedReads;
  const loadedAt = performance.now();
  await publish(Array.from({ length: 50 }, (_, i) => message(`loaded-${i}`)));
  await publish([message('after-loaded')]);
  const afterLoaded = performance.now() - loadedAt;
  assert.equal(relay.stats.spacedReads, spacedBefore + 1, 'the read after the loaded batch was spaced');
  assert.ok(afterLoaded >= 15, `a loaded batch and the next message published ${afterLoaded.toFixed(1)} ms after the batch was written`);
  // Lone messages are not spaced, and each goes out on its NOTIFY, not on the relay's 1 s poll.
  const lone: number[] = [];
  for (let i = 0; i < 10; i++) lone.push(await publish([message(`lone-${i}`)]));
  assert.equal(relay.stats.spacedReads, spacedBefore + 1, 'no read after a lone message was spaced');
  assert.ok(Math.max(...lone) < 500, `ten lone messages took ${lone.map((ms) => ms.toFixed(1)).join(', ')} ms (the poll is every 1,000 ms)`);
});

test('on the embedded PGlite database and the in-process bus, the relay reads from its cursor, drops a rolled-back gap and sets aside rows it can never publish', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tgs-relay-pglite-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const databaseUrl = pgliteUrl(path.join(dir, 'pglite'));
  const pool = createPool(databaseUrl);
  t.after(() => pool.end());
  await migrate(pool);
  const busUrl = memoryBusUrl(`relay-test-${randomBytes(4).toString('hex')}`);
  const embedded = loadConfig({}, { databaseUrl, amqpUrl: busUrl, exchangePrefix: config.exchangePrefix });
  const exchange = queueExchangeName(embedded.exchangePrefix, 'task-completed');
  const bus = await connectBus(busUrl);
  t.after(() => bus.close());
  const ch = await bus.createChannel();
  await ch.assertExchange(exchange, 'topic', { durable: true });
  await ch.assertQueue('relay-test');
  await ch.bindQueue('relay-test', exchange, '#');
  const got: string[] = [];
  await ch.consume('relay-test', (m) => {
    if (m) got.push(m.properties.messageId as string);
  }, { noAck: true });
  const message = (id: string): OutboxMessage => ({ exchange, routingKey: `${id}.0._._.p.w.s.g._`, payload: {}, messageId: id });

  const relay = stopAfter(t, await startRelay({ temporal: undefined, config: embedded, pool, log: () => undefined }));
  await enqueueMessages(pool, [message('p-0'), message('p-1')]);
  await eventually(async () => got.length === 2, 'published');
  // PGlite runs one transaction at a time, so a gap there is a rollback's.
  await assert.rejects(
    withTransaction(pool, async (client) => {
      await enqueueMessages(client, [message('p-rolled-back')]);
      throw new Error('roll back');
    }),
    /roll back/,
  );
  await enqueueMessages(pool, [message('p-2')]);
  await eventually(async () => got.length === 3 && relay.stats.gaps === 1, 'the next row published, the rolled-back id a gap');
  await eventually(async () => relay.stats.gaps === 0, 'the gap dropped', 15_000);

  // A row rendered from no task row at all between two good ones, and a deferred-lane row as broken.
  await withTransaction(pool, async (client) => {
    await enqueueMessages(client, [message('p-3')]);
    await client.query(`INSERT INTO outbox (message_id, exchange, routing_key, payload, render) VALUES ('p-poison', '', '', '{"runId": 0}', 'task-running')`);
    await client.query(`INSERT INTO outbox_deferred (task_id, message_id, payload, render) VALUES ('T-poison', 'p-deferred-poison', '{}', 'task-defined')`);
    await enqueueMessages(client, [message('p-4')]);
  });
  await eventually(async () => got.length === 5 && relay.stats.deadLettered === 2 && (await countOutbox(pool)) === 0, 'the good rows published, the others set aside');
  await relay.stop();
  assert.deepEqual(got, ['p-0', 'p-1', 'p-2', 'p-3', 'p-4']);
  const dead = await deadLetters(pool);
  // the lane's row goes with the lane's read, after the outbox's batch (it was written without a NOTIFY of its own)
  assert.deepEqual(dead.map((d) => [d.lane, d.message_id, d.task_id]), [['outbox', 'p-poison', null], ['deferred', 'p-deferred-poison', 'T-poison']]);
  for (const d of dead) assert.match(d.reason, /^cannot be rendered as a task-(running|defined) message: /);
});

test("a graph's task-defined messages wait in the deferred lane; a later message of one of its tasks goes out ahead of the lane, its task-defined first", async (t) => {
  // 1,200 tasks whose task-defined messages are in the deferred lane, as a graph's submit leaves them
  const taskIds = await insertPendingTasks(db.pool, 1200, `lane-${randomBytes(3).toString('hex')}`);
  await db.pool.query('DELETE FROM outbox');
  await db.pool.query(deferredDefinedInsert('SELECT task_id FROM unnest($1::text[]) AS task_id'), [taskIds]);
  // then two later messages, of tasks whose task-defined messages lie deep in the lane: a claim's (a row written
  // for rendering) and one written whole
  const claimed = await claimPending(db.pool, config, testIssuer(), { provisionerId: 'tgs-test', workerType: (await loadTask(db.pool, taskIds[0]))!.worker_type, workerGroup: 'g', workerId: 'w', count: 1 });
  const running = claimed[0].status.taskId;
  const pendingTask = taskIds[1100];
  await enqueueMessages(db.pool, [taskMessage(config, 'task-pending', (await loadTask(db.pool, pendingTask))!, 0)]);
  // the claimed task was the lane's first: move its message to the lane's end, where only the claim can bring it early
  await db.pool.query(`UPDATE outbox_deferred SET id = id + 10000 WHERE task_id = $1`, [running]);

  const queue = `${config.exchangePrefix}relay-lane-test`;
  const conn = await amqp.connect(config.amqpUrl);
  t.after(() => conn.close().catch(() => undefined));
  const ch = await conn.createChannel();
  await ch.assertQueue(queue, { exclusive: true });
  for (const name of ['task-defined', 'task-pending', 'task-running'] as const) {
    const exchange = queueExchangeName(config.exchangePrefix, name);
    await ch.assertExchange(exchange, 'topic', { durable: true });
    await ch.bindQueue(queue, exchange, '#');
  }
  const got: Array<{ exchange: string; taskId: string }> = [];
  await ch.consume(queue, (m) => {
    if (m) got.push({ exchange: m.fields.exchange.slice(config.exchangePrefix.length), taskId: JSON.parse(m.content.toString()).status.taskId });
  }, { noAck: true });

  const relay = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: () => undefined }));
  await eventually(async () => got.length === 1202 && (await outboxCount()) === 0, 'every message published', 30_000);
  // a lane row whose NOTIFY never came (written without one) still goes out: the relay looks at the lane after a
  // second without any NOTIFY
  await db.pool.query(deferredDefinedInsert('SELECT $1::text AS task_id'), [taskIds[5]]);
  const definedOf = (taskId: string) => got.filter((m) => m.exchange.endsWith('task-defined') && m.taskId === taskId).length;
  await eventually(async () => definedOf(taskIds[5]) === 2, 'the lane read without its NOTIFY', 10_000);
  await relay.stop();
  const at = (exchange: string, taskId: string) => got.findIndex((m) => m.exchange.endsWith(exchange) && m.taskId === taskId);
  // each later message went out in the first batch, ahead of the lane's 1,198 other messages, its task-defined first
  assert.ok(at('task-running', running) < 4 && at('task-pending', pendingTask) < 4, JSON.stringify(got.slice(0, 6)));
  assert.ok(at('task-defined', running) < at('task-running', running));
  assert.ok(at('task-defined', pendingTask) < at('task-pending', pendingTask));
  // and every task's task-defined message went out once
  const defined = got.slice(0, 1202).filter((m) => m.exchange.endsWith('task-defined')).map((m) => m.taskId);
  assert.deepEqual([...defined].sort(), [...taskIds].sort());
});

test("the deferred lane's task-defined message shows the task as defined, however far it got since; a task gone is set aside", async (t) => {
  const workerType = `as-defined-${randomBytes(3).toString('hex')}`;
  const taskIds = await insertPendingTasks(db.pool, 3, workerType);
  await db.pool.query('DELETE FROM outbox');
  await db.pool.query(deferredDefinedInsert('SELECT task_id FROM unnest($1::text[]) AS task_id'), [taskIds]);
  // after the submit: one task claimed (running, a run, no longer unscheduled), one deleted (as an expiry would)
  const claimed = await claimPending(db.pool, config, testIssuer(), { provisionerId: 'tgs-test', workerType, workerGroup: 'g', workerId: 'w', count: 1 });
  const moved = claimed[0].status.taskId;
  const [gone, pendingOnly] = taskIds.filter((id) => id !== moved);
  await db.pool.query('DELETE FROM tasks WHERE task_id = $1', [gone]);
  await db.pool.query(`UPDATE tasks SET retries_left = 0 WHERE task_id = $1`, [pendingOnly]);

  const queue = `${config.exchangePrefix}relay-as-defined-test`;
  const conn = await amqp.connect(config.amqpUrl);
  t.after(() => conn.close().catch(() => undefined));
  const ch = await conn.createChannel();
  await ch.assertQueue(queue, { exclusive: true });
  const exchange = queueExchangeName(config.exchangePrefix, 'task-defined');
  await ch.assertExchange(exchange, 'topic', { durable: true });
  await ch.bindQueue(queue, exchange, '#');
  const got: Array<{ messageId: string; status: { taskId: string; state: string; runs: unknown[]; retriesLeft: number } }> = [];
  await ch.consume(queue, (m) => {
    if (m) got.push({ messageId: m.properties.messageId as string, status: JSON.parse(m.content.toString()).status });
  }, { noAck: true });
  t.after(() => db.pool.query('DELETE FROM outbox_dead_letters'));
  const relay = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: () => undefined }));
  await eventually(async () => got.length === 2 && relay.stats.deadLettered === 1 && (await countOutbox(db.pool)) === 0, 'two published, one set aside', 15_000);
  await relay.stop();
  const retries = (await loadTask(db.pool, moved))!.retries;
  for (const taskId of [moved, pendingOnly]) {
    const message = got.find((m) => m.status.taskId === taskId);
    assert.ok(message, `${taskId}'s task-defined message published`);
    assert.equal(message.messageId, `${taskId}/_/task-defined/0`);
    assert.equal(message.status.state, 'unscheduled');
    assert.deepEqual(message.status.runs, []);
    assert.equal(message.status.retriesLeft, retries);
  }
  const dead = await deadLetters(db.pool);
  assert.deepEqual(dead.map((d) => [d.lane, d.task_id, d.payload]), [['deferred', gone, null]]);
  assert.match(dead[0].reason, /^cannot be rendered as a task-defined message: /);
});

/** The rows of outbox_dead_letters, in order. */
async function deadLetters(pool: Pick<pg.Pool, 'query'>) {
  const { rows } = await pool.query<{ id: number; lane: string; source_id: number; message_id: string; exchange: string; routing_key: string; payload: unknown; render: string | null; task_id: string | null; reason: string }>(
    'SELECT id, lane, source_id, message_id, exchange, routing_key, payload, render, task_id, reason FROM outbox_dead_letters ORDER BY id',
  );
  return rows;
}

/** docs/operations.md's replay statement, for the dead letters `ids`: the test runs what an operator would. */
function documentedReplay(ids: number[]): string {
  const doc = readFileSync(new URL('../../docs/operations.md', import.meta.url), 'utf8');
  const sql = /```sql\n(WITH r AS \(DELETE FROM outbox_dead_letters[\s\S]*?)```/.exec(doc)?.[1];
  if (!sql?.includes("'{7,8}'")) throw new Error('docs/operations.md shows no replay of dead letters 7 and 8');
  return sql.replace("'{7,8}'", `'{${ids.join(',')}}'`);
}

test('rows that can never be published are set aside in outbox_dead_letters, once each; the good rows around them go out in order', async (t) => {
  const { name, exchange } = await durableQueue('#');
  const [taskId] = await insertPendingTasks(db.pool, 1, `poison-${randomBytes(3).toString('hex')}`);
  const good = (i: number): OutboxMessage => ({ exchange, routingKey: `good${i}.0._._.p.w.s.g._`, payload: { i }, messageId: `good-${i}` });
  const raw = (client: pg.PoolClient, messageId: string, exchangeName: string, routingKey: string) =>
    client.query(`INSERT INTO outbox (message_id, exchange, routing_key, payload) VALUES ($1, $2, $3, '{}')`, [messageId, exchangeName, routingKey]);
  // One transaction, so one batch: good rows before, between and after three kinds of poison.
  const ids = await withTransaction(db.pool, async (client) => {
    await enqueueMessages(client, [good(0), good(1)]);
    // a claim's row for rendering whose run is past Taskcluster's 50 (the message schema refuses runId 70)
    await client.query(
      `INSERT INTO outbox (message_id, exchange, routing_key, payload, render)
       SELECT 'poison-schema', '', '', jsonb_build_object('row', to_jsonb(c), 'runId', 70), 'task-running'
         FROM (SELECT ${TASK_COLUMNS} FROM tasks WHERE task_id = $1) c`,
      [taskId],
    );
    await enqueueMessages(client, [good(2)]);
    await raw(client, 'poison-key', exchange, `${'k'.repeat(300)}.0._._.p.w.s.g._`);
    await enqueueMessages(client, [good(3)]);
    await raw(client, 'poison-exchange', `${config.exchangePrefix}queue/v1/no-such-exchange`, 'x');
    await enqueueMessages(client, [good(4)]);
    return (await client.query<{ id: number; message_id: string }>('SELECT id, message_id FROM outbox ORDER BY id')).rows;
  });
  t.after(() => db.pool.query('DELETE FROM outbox_dead_letters'));
  const idOf = (messageId: string) => ids.find((r) => r.message_id === messageId)!.id;
  const lines: string[] = [];
  const relay = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: (line) => lines.push(line) }));
  const unobserve = observeRelay(db.url, db.pool, relay.stats);
  t.after(unobserve);
  await eventually(async () => (await outboxCount()) === 0 && relay.stats.published === 5, 'the good rows published, the outbox empty');

  const dead = await deadLetters(db.pool);
  assert.deepEqual(dead.map((d) => [d.lane, d.source_id, d.message_id]), [
    ['outbox', idOf('poison-schema'), 'poison-schema'],
    ['outbox', idOf('poison-key'), 'poison-key'],
    ['outbox', idOf('poison-exchange'), 'poison-exchange'],
  ]);
  assert.match(dead[0].reason, /^cannot be rendered as a task-running message: message does not match its schema: message.runId must be <= 49$/);
  assert.equal(dead[0].render, 'task-running');
  assert.equal((dead[0].payload as { row: { task_id: string } }).row.task_id, taskId, 'the row is kept as it was');
  assert.match(dead[1].reason, /routing key is 316 bytes long/);
  assert.match(dead[2].reason, /no-such-exchange" is not one the relay declares/);
  const setAside = lines.filter((l) => l.startsWith('set aside'));
  assert.equal(setAside.length, 3, lines.join('\n'));
  assert.match(setAside[0], new RegExp(`^set aside outbox row ${idOf('poison-schema')} \\(message poison-schema\\) as outbox_dead_letters row ${dead[0].id}: cannot be rendered`));
  assert.equal(relay.stats.deadLettered, 3);
  assert.match(await registry.getSingleMetricAsString('tgs_relay_dead_lettered_messages_total'), /^tgs_relay_dead_lettered_messages_total 3$/m);
  assert.match(await registry.getSingleMetricAsString('tgs_outbox_dead_letters'), /^tgs_outbox_dead_letters 3$/m);

  // The operator mends the long key and replays that row with the statement docs/operations.md gives.
  await db.pool.query(`UPDATE outbox_dead_letters SET routing_key = 'mended.0._._.p.w.s.g._' WHERE id = $1`, [dead[1].id]);
  await db.pool.query(documentedReplay([dead[1].id]));
  await eventually(async () => relay.stats.published === 6 && (await outboxCount()) === 0, 'the replayed row published');
  assert.deepEqual((await deadLetters(db.pool)).map((d) => d.message_id), ['poison-schema', 'poison-exchange']);
  await relay.stop();
  assert.equal(lines.filter((l) => l.startsWith('set aside')).length, 3, 'each row logged once');

  const conn = await amqp.connect(config.amqpUrl);
  t.after(() => conn.close().catch(() => undefined));
  const ch = await conn.createChannel();
  const order: string[] = [];
  for (;;) {
    const m = await ch.get(name, { noAck: true });
    if (!m) break;
    order.push(m.properties.messageId as string);
  }
  await ch.deleteQueue(name);
  assert.deepEqual(order, ['good-0', 'good-1', 'good-2', 'good-3', 'good-4', 'poison-key']);
});

test('a broker that refuses every message (a nack) sets nothing aside: the batch is sent again until the broker takes it', async (t) => {
  const { name, exchange } = await durableQueue('#');
  // A queue that rejects whatever reaches it: RabbitMQ nacks the publish, so the relay's confirm wait fails.
  const refusing = `${config.exchangePrefix}relay-refusing`;
  const conn = await amqp.connect(config.amqpUrl);
  t.after(() => conn.close().catch(() => undefined));
  const ch = await conn.createChannel();
  await ch.assertQueue(refusing, { arguments: { 'x-max-length': 0, 'x-overflow': 'reject-publish' } });
  await ch.bindQueue(refusing, exchange, 'refused.#');
  const lines: string[] = [];
  const relay = stopAfter(t, await startRelay({ temporal: undefined, config, pool: db.pool, log: (line) => lines.push(line) }));
  await enqueueMessages(db.pool, [
    { exchange, routingKey: 'fine.0._._.p.w.s.g._', payload: {}, messageId: 'before-refusal' },
    { exchange, routingKey: 'refused.0._._.p.w.s.g._', payload: {}, messageId: 'refused' },
  ]);
  // Each refused batch closes the connection and opens a new one: three connections, at least two refusals.
  await eventually(async () => relay.stats.connections >= 3, 'the relay retried the refused batch', 15_000);
  assert.ok(lines.some((l) => l.startsWith('publishing unavailable')), lines.join('\n'));
  assert.equal(await outboxCount(), 2, 'the batch stays in the outbox');
  assert.equal(relay.stats.deadLettered, 0);
  assert.deepEqual(await deadLetters(db.pool), []);
  await ch.deleteQueue(refusing);
  await eventually(async () => (await outboxCount()) === 0, 'published once the broker takes it');
  await relay.stop();
  assert.deepEqual(await deadLetters(db.pool), [], 'nothing set aside');
  assert.equal(lines.filter((l) => l.startsWith('set aside')).length, 0);
  const seen = await drainCounts(name);
  assert.ok(seen.has('before-refusal') && seen.has('refused'), [...seen.keys()].join(' '));
});
