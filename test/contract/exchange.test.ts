import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { connectBus, memoryBusUrl, type BusChannel, type BusConnection, type BusMessage } from '../../src/exchanges/bus.js';
import { queueExchangeName, taskRoutingKey } from '../../src/exchanges/exchanges.js';
import { enqueueMessages } from '../../src/exchanges/outbox.js';
import { startRelay } from '../../src/relay/relay.js';
import { loadConfig } from '../../src/config.js';
import { createTestDatabase, outboxCount, type TestDatabase } from '../../support/db.js';
import { eventually } from '../../support/stack.js';

// One suite, two buses: RabbitMQ (what deployments use) and the in-process bus of `tgs dev` without
// AMQP_URL. Every expectation below is written out by hand, so both must behave like RabbitMQ.
const implementations = [
  { name: 'RabbitMQ', url: process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672' },
  { name: 'in-process bus', url: memoryBusUrl(`contract-${randomBytes(4).toString('hex')}`) },
];

interface Got {
  queue: string;
  routingKey: string;
  exchange: string;
  messageId: string | undefined;
  body: string;
  cc: unknown;
  contentType: string | undefined;
  redelivered: boolean;
}

for (const impl of implementations) {
  describe(`message bus contract: ${impl.name}`, () => {
    const prefix = `contract-${randomBytes(4).toString('hex')}/`;
    let conn: BusConnection;
    let ch: BusChannel;
    const exchanges = new Set<string>();
    const queues = new Set<string>();

    before(async () => {
      conn = await connectBus(impl.url);
      ch = await conn.createChannel();
    });
    after(async () => {
      for (const q of queues) await ch.deleteQueue(q);
      for (const e of exchanges) await ch.deleteExchange(e);
      await conn.close();
    });

    const exchange = async (name: string) => {
      const full = `${prefix}${name}`;
      await ch.assertExchange(full, 'topic', { durable: true });
      exchanges.add(full);
      return full;
    };

    /** Named queues bound with the given patterns; every delivery lands in `got` (and is acked). */
    const bindAll = async (ex: string, bindings: Record<string, string[]>, got: Got[]) => {
      for (const [queueName, patterns] of Object.entries(bindings)) {
        const { queue } = await ch.assertQueue(`${ex}/${queueName}`, { durable: false, autoDelete: false });
        queues.add(queue);
        for (const p of patterns) await ch.bindQueue(queue, ex, p);
        await ch.consume(queue, (m) => {
          if (!m) return;
          got.push(received(queueName, m));
          ch.ack(m);
        });
      }
    };

    const received = (queue: string, m: BusMessage): Got => ({
      queue,
      routingKey: m.fields.routingKey,
      exchange: m.fields.exchange,
      messageId: m.properties.messageId as string | undefined,
      body: m.content.toString('utf8'),
      cc: m.properties.headers?.CC,
      contentType: m.properties.contentType as string | undefined,
      redelivered: m.fields.redelivered,
    });

    /** Publishes the messages and a final marker every queue's catch-all binding sees, then waits for the markers. */
    const publishAndSettle = async (ex: string, keys: string[], got: Got[], queueNames: string[]) => {
      for (const [i, key] of keys.entries()) ch.publish(ex, key, Buffer.from(`m${i}`), { messageId: `id-${i}` });
      ch.publish(ex, 'zz.end.marker', Buffer.from('end'), { messageId: 'end' });
      await eventually(async () => queueNames.every((q) => got.some((g) => g.queue === q && g.messageId === 'end')), 'every queue saw the end marker', 10_000);
    };

    const keysSeenBy = (got: Got[], queue: string) =>
      got.filter((g) => g.queue === queue && g.messageId !== 'end').map((g) => g.routingKey);

    test('topic patterns: * is exactly one word, # is zero or more words', async () => {
      const ex = await exchange('patterns');
      const got: Got[] = [];
      const patterns: Record<string, string[]> = {
        star: ['a.*.c', 'zz.end.marker'],
        hashTail: ['a.#', 'zz.end.marker'],
        hashHead: ['#.c', 'zz.end.marker'],
        hashMiddle: ['a.#.c', 'zz.end.marker'],
        one: ['*', 'zz.end.marker'],
        twoStars: ['*.*', 'zz.end.marker'],
        exact: ['a.b', 'zz.end.marker'],
        all: ['#'],
        starHash: ['*.b.#', 'zz.end.marker'],
      };
      await bindAll(ex, patterns, got);
      const keys = ['a.b.c', 'a', 'a.b', 'a.b.b.c', 'x.c', 'c', 'a.c', 'b.b', 'x.b.y.z'];
      await publishAndSettle(ex, keys, got, Object.keys(patterns));
      const expected: Record<string, string[]> = {
        star: ['a.b.c'],
        hashTail: ['a.b.c', 'a', 'a.b', 'a.b.b.c', 'a.c'],
        hashHead: ['a.b.c', 'a.b.b.c', 'x.c', 'c', 'a.c'],
        hashMiddle: ['a.b.c', 'a.b.b.c', 'a.c'],
        one: ['a', 'c'],
        twoStars: ['a.b', 'x.c', 'a.c', 'b.b'],
        exact: ['a.b'],
        all: [...keys, 'zz.end.marker'],
        starHash: ['a.b.c', 'a.b', 'a.b.b.c', 'b.b', 'x.b.y.z'],
      };
      for (const [queue, keysExpected] of Object.entries(expected)) {
        const seen = queue === 'all' ? got.filter((g) => g.queue === 'all').map((g) => g.routingKey) : keysSeenBy(got, queue);
        assert.deepEqual(seen, keysExpected, `queue bound to ${patterns[queue].join(', ')} (in publish order)`);
      }
    });

    test('CC routes: a message reaches every queue one of its keys matches, once per queue, with headers.CC kept', async () => {
      const ex = await exchange('cc');
      const got: Got[] = [];
      const bindings = {
        primary: ['t1.0.#', 'zz.end.marker'],
        route: ['route.notify.#', 'zz.end.marker'],
        twoRoutes: ['route.notify.by-test', 'route.other', 'zz.end.marker'],
        all: ['#'],
        nothing: ['route.unrelated', 'zz.end.marker'],
      };
      await bindAll(ex, bindings, got);
      ch.publish(ex, 't1.0._._.p.w.s.g._', Buffer.from('{"x":1}'), {
        messageId: 'cc-1',
        contentType: 'application/json',
        CC: ['route.notify.by-test', 'route.other'],
      });
      ch.publish(ex, 'zz.end.marker', Buffer.from('end'), { messageId: 'end' });
      await eventually(async () => Object.keys(bindings).every((q) => got.some((g) => g.queue === q && g.messageId === 'end')), 'end markers', 10_000);
      const cc1 = got.filter((g) => g.messageId === 'cc-1');
      assert.deepEqual(cc1.map((g) => g.queue).sort(), ['all', 'primary', 'route', 'twoRoutes']);
      for (const g of cc1) {
        assert.equal(g.routingKey, 't1.0._._.p.w.s.g._', 'the routing key delivered is the primary one');
        assert.deepEqual(g.cc, ['route.notify.by-test', 'route.other']);
        assert.equal(g.body, '{"x":1}');
        assert.equal(g.contentType, 'application/json');
        assert.equal(g.exchange, ex);
      }
    });

    test("the consumers of docs/formats.md § Queue exchanges: provisioner, long-polling worker, cancellation-aware worker, worker group, dependent-task scheduler", async () => {
      const ex = await exchange(queueExchangeName('', 'task-failed'));
      const got: Got[] = [];
      const bindings = {
        provisioner: ['*.*.*.*.prov-a.#', 'zz.end.marker'],
        worker: ['*.*.*.*.prov-a.type-x.#', 'zz.end.marker'],
        cancellation: ['*.*.grp-1.w-1.#', 'zz.end.marker'],
        group: ['*.*.grp-1.#', 'zz.end.marker'],
        scheduler: ['*.*.*.*.*.*.sched-k.#', 'zz.end.marker'],
      };
      await bindAll(ex, bindings, got);
      const key = (taskId: string, p: Partial<Parameters<typeof taskRoutingKey>[0]>) =>
        taskRoutingKey({ taskId, provisionerId: 'prov-a', workerType: 'type-x', schedulerId: 'sched-k', taskGroupId: 'G', ...p });
      const keys = [
        key('T1', { runId: 0, workerGroup: 'grp-1', workerId: 'w-1', routing: 'with.dots.in.it' }),
        key('T2', { runId: 1, workerGroup: 'grp-1', workerId: 'w-2' }),
        key('T3', { provisionerId: 'prov-b', workerType: 'type-x', schedulerId: 'other' }),
        key('T4', { workerType: 'type-y', runId: 0, workerGroup: 'grp-2', workerId: 'w-1', schedulerId: 'other' }),
        key('T5', { provisionerId: 'prov-b', runId: 2, workerGroup: 'grp-1', workerId: 'w-1' }),
      ];
      await publishAndSettle(ex, keys, got, Object.keys(bindings));
      const ids = (queue: string) => keysSeenBy(got, queue).map((k) => k.split('.')[0]);
      assert.deepEqual(ids('provisioner'), ['T1', 'T2', 'T4']);
      assert.deepEqual(ids('worker'), ['T1', 'T2']);
      assert.deepEqual(ids('cancellation'), ['T1', 'T5']);
      assert.deepEqual(ids('group'), ['T1', 'T2', 'T5']);
      assert.deepEqual(ids('scheduler'), ['T1', 'T2', 'T5']);
    });

    test('at-least-once: unacked messages come back, redelivered and with their messageId, to a consumer that reconnects', async () => {
      const ex = await exchange('durable');
      const queue = `${prefix}durable-queue`;
      await ch.assertQueue(queue, { durable: true });
      queues.add(queue);
      await ch.bindQueue(queue, ex, '#');
      // The first consumer takes everything and acks only m0, then its connection goes away.
      const first = await connectBus(impl.url);
      const firstCh = await first.createChannel();
      const seenFirst: Got[] = [];
      await firstCh.consume(queue, (m) => {
        if (!m) return;
        seenFirst.push(received('q', m));
        if (m.properties.messageId === 'm0') firstCh.ack(m);
      });
      for (let i = 0; i < 4; i++) ch.publish(ex, `k.${i}`, Buffer.from(`body-${i}`), { messageId: `m${i}`, persistent: true });
      await eventually(async () => seenFirst.length === 4, 'the first consumer got the 4 messages', 10_000);
      assert.deepEqual(seenFirst.map((g) => [g.messageId, g.redelivered]), [['m0', false], ['m1', false], ['m2', false], ['m3', false]]);
      await first.close();
      // Published while nobody consumes: waits in the queue.
      ch.publish(ex, 'k.4', Buffer.from('body-4'), { messageId: 'm4', persistent: true });

      const second = await connectBus(impl.url);
      const secondCh = await second.createChannel();
      const seenSecond: Got[] = [];
      await secondCh.consume(queue, (m) => {
        if (!m) return;
        seenSecond.push(received('q', m));
        // nack the first redelivery of m1 once: it must come back again
        if (m.properties.messageId === 'm1' && seenSecond.filter((g) => g.messageId === 'm1').length === 1) secondCh.nack(m, false, true);
        else secondCh.ack(m);
      });
      await eventually(async () => new Set(seenSecond.map((g) => g.messageId)).size === 4 && seenSecond.length === 5, 'm1..m4 (m1 twice)', 10_000);
      const byId = (id: string) => seenSecond.filter((g) => g.messageId === id);
      for (const id of ['m1', 'm2', 'm3']) {
        assert.ok(byId(id).every((g) => g.redelivered), `${id} is marked redelivered`);
        assert.equal(byId(id)[0].body, `body-${id.slice(1)}`);
      }
      assert.equal(byId('m1').length, 2, 'a nacked message is delivered again');
      assert.deepEqual(byId('m4').map((g) => g.redelivered), [false]);
      assert.equal(byId('m0').length, 0, 'an acked message is gone');
      await second.close();
    });

    test("a quorum queue with a delivery limit dead-letters a message returned more often than its limit; it cannot be redeclared classic", async () => {
      const dead = await exchange('dead');
      const { queue: deadQueue } = await ch.assertQueue(`${dead}/q`, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
      queues.add(deadQueue);
      await ch.bindQueue(deadQueue, dead, '#');
      const name = `${prefix}limited`;
      const args = { 'x-queue-type': 'quorum', 'x-delivery-limit': 2, 'x-dead-letter-exchange': dead, 'x-dead-letter-routing-key': 'dead' };
      await ch.assertQueue(name, { durable: true, arguments: args });
      queues.add(name);
      assert.equal((await ch.assertQueue(name, { durable: true, arguments: args })).queue, name, 'the same arguments again: fine');

      const c = await connectBus(impl.url);
      const consumer = await c.createChannel();
      const deliveries: { redelivered: boolean; count: unknown }[] = [];
      await consumer.consume(name, (m) => {
        if (!m) return;
        deliveries.push({ redelivered: m.fields.redelivered, count: m.properties.headers?.['x-delivery-count'] });
        consumer.nack(m, false, true);
      });
      ch.publish('', name, Buffer.from('poison'), { messageId: 'poison', persistent: true });
      const deadLettered: Got[] = [];
      const reader = await c.createChannel();
      await reader.consume(deadQueue, (m) => {
        if (m) deadLettered.push(received('dead', m));
      }, { noAck: true });
      await eventually(async () => deadLettered.length === 1, 'the message dead-lettered', 10_000);
      // RabbitMQ 3.x: a limit of 2 delivers it 3 times (2 redeliveries), then dead-letters it at its third return
      assert.deepEqual(deliveries, [{ redelivered: false, count: undefined }, { redelivered: true, count: 1 }, { redelivered: true, count: 2 }]);
      assert.deepEqual([deadLettered[0].messageId, deadLettered[0].routingKey, deadLettered[0].exchange, deadLettered[0].body], ['poison', 'dead', dead, 'poison']);
      await c.close();

      const typed = `${prefix}quorum`;
      await ch.assertQueue(typed, { durable: true, arguments: { 'x-queue-type': 'quorum' } });
      queues.add(typed);
      const other = await connectBus(impl.url);
      other.on('error', () => undefined);
      try {
        const otherCh = await other.createChannel();
        otherCh.on('error', () => undefined);
        const refused = await otherCh.assertQueue(typed, { durable: true }).then(() => undefined, (err: Error & { code?: number }) => err);
        assert.equal(refused?.code, 406);
        assert.match(refused?.message ?? '', /PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue '[^']+' in vhost '\/': received none but current is the value 'quorum' of type 'longstr'/);
        // the bridge's quorum arguments where a classic queue exists: RabbitMQ names the dead-letter exchange first
        const classic = `${prefix}classic`;
        const again = await other.createChannel();
        again.on('error', () => undefined);
        await again.assertQueue(classic, { durable: true });
        queues.add(classic);
        const upgrade = await again.assertQueue(classic, { durable: true, arguments: args }).then(() => undefined, (err: Error & { code?: number }) => err);
        assert.equal(upgrade?.code, 406);
        assert.match(upgrade?.message ?? '', /inequivalent arg 'x-dead-letter-exchange' for queue '[^']+' in vhost '\/': received the value '[^']+' of type 'longstr' but current is none/);
      } finally {
        await other.close().catch(() => undefined);
      }
    });

    test('a confirm channel refuses a publish to a missing exchange (the channel closes, waitForConfirms rejects)', async () => {
      const c = await connectBus(impl.url);
      c.on('error', () => undefined);
      const confirm = await c.createConfirmChannel();
      const closed = new Promise<void>((resolve) => confirm.on('close', resolve));
      confirm.on('error', () => undefined);
      confirm.publish(`${prefix}no-such-exchange`, 'k', Buffer.from('x'), { messageId: 'lost' });
      await assert.rejects(confirm.waitForConfirms());
      await closed;
      await c.close();
    });

    test("an exchange declared again with another alternate-exchange argument is refused with 406 naming both (a deployment's marker, src/bridge/deploymentMarker.ts)", async () => {
      const name = `${prefix}marker`;
      const args = (value: string) => ({ durable: true, arguments: { 'alternate-exchange': value } });
      await ch.assertExchange(name, 'topic', args('tgs:one'));
      exchanges.add(name);
      await ch.assertExchange(name, 'topic', args('tgs:one'));
      const c = await connectBus(impl.url);
      c.on('error', () => undefined);
      const other = await c.createChannel();
      const closed = new Promise<void>((resolve) => other.on('close', resolve));
      other.on('error', () => undefined);
      await assert.rejects(other.assertExchange(name, 'topic', args('tgs:two')), (err: Error & { code?: number }) => {
        assert.equal(err.code, 406);
        assert.match(err.message, /PRECONDITION_FAILED - inequivalent arg 'alternate-exchange' for exchange '[^']+' in vhost '\/': received 'tgs:two' but current is 'tgs:one'/);
        return true;
      });
      await closed;
      await c.close();
    });

    test('the relay publishes outbox rows to this bus in order, with their messageIds, routing keys and CC', async () => {
      let db: TestDatabase | undefined;
      let relay: Awaited<ReturnType<typeof startRelay>> | undefined;
      try {
        db = await createTestDatabase();
        const relayPrefix = `${prefix}relay/`;
        const config = loadConfig({}, { databaseUrl: db.url, amqpUrl: impl.url, exchangePrefix: relayPrefix });
        const ex = queueExchangeName(relayPrefix, 'task-completed');
        await ch.assertExchange(ex, 'topic', { durable: true });
        const got: Got[] = [];
        await bindAll(ex, { relayed: ['#.sched.#'], routed: ['route.done'] }, got);
        relay = await startRelay({ temporal: undefined, config, pool: db.pool, log: () => undefined });
        await enqueueMessages(
          db.pool,
          Array.from({ length: 20 }, (_, i) => ({
            exchange: ex,
            routingKey: `t${i}.0.g.w.p.wt.sched.grp._`,
            cc: i % 5 === 0 ? ['route.done'] : [],
            payload: { n: i },
            messageId: `relay-${i}`,
          })),
        );
        await eventually(async () => got.filter((g) => g.queue === 'relayed').length === 20 && got.filter((g) => g.queue === 'routed').length === 4, 'the 20 messages', 15_000);
        assert.deepEqual(got.filter((g) => g.queue === 'relayed').map((g) => g.messageId), Array.from({ length: 20 }, (_, i) => `relay-${i}`));
        assert.deepEqual(got.filter((g) => g.queue === 'routed').map((g) => g.messageId), ['relay-0', 'relay-5', 'relay-10', 'relay-15']);
        assert.deepEqual(JSON.parse(got[0].body), { n: 0 });
        assert.equal(got[0].contentType, 'application/json');
        // A row is deleted once the broker confirmed it, which may come after a consumer already got the message.
        const outboxEmpty = async () => (await outboxCount((db as TestDatabase).pool)) === 0;
        await eventually(outboxEmpty, 'published rows leave the outbox', 15_000);
        for (const name of (await import('../../src/exchanges/exchanges.js')).allExchangeNames(relayPrefix)) exchanges.add(name);
      } finally {
        await relay?.stop();
        await db?.drop();
      }
    });
  });
}
