import { test } from 'node:test';
import assert from 'node:assert/strict';
import { busNodeName } from '../../src/exchanges/bus.js';
import { BusReconnect } from '../../src/exchanges/busReconnect.js';

const live = process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672';
const dead = 'amqp://guest:guest@127.0.0.1:1';

test('a lost connection reconnected at once is one line naming the node; a dead node on the way is no outage', async () => {
  const lines: string[] = [];
  const bus = new BusReconnect({ url: `${live},${dead}`, connectionName: 'tgs-test-reconnect', what: 'test: RabbitMQ', log: (l) => lines.push(l), firstDelayMs: 10, maxDelayMs: 50 });
  const first = await bus.connect(async (conn) => conn.createChannel(), () => false);
  assert.ok(first);
  assert.equal(bus.currentNode, busNodeName(live));
  assert.deepEqual(lines, [], 'connecting is not news');
  await first.conn.close();
  bus.lost(new Error('CONNECTION_FORCED - broker forced connection closure'));
  // the node after the lost one (dead) is tried first, then the live one again
  const second = await bus.connect(async (conn) => conn.createChannel(), () => false);
  assert.ok(second);
  assert.deepEqual(lines, [`test: RabbitMQ: connection to ${busNodeName(live)} lost (CONNECTION_FORCED - broker forced connection closure); connected to ${busNodeName(live)} again`]);
  assert.ok(!lines.join('').includes('guest'), 'no credentials');
  await second.conn.close();
});

test('no node answering: one line however many attempts, naming each node, until stopped; a fatal setup error is thrown at once', async () => {
  const lines: string[] = [];
  let attempts = 0;
  const bus = new BusReconnect({
    url: `${dead},amqp://guest:guest@127.0.0.1:2`,
    connectionName: 'tgs-test-reconnect',
    what: 'test: RabbitMQ',
    log: (l) => lines.push(l),
    firstDelayMs: 5,
    maxDelayMs: 20,
    consequence: () => '3 message(s) waiting',
    onAttemptFailed: () => attempts++,
  });
  const result = await bus.connect(async () => 'never', () => attempts >= 5);
  assert.equal(result, undefined);
  assert.equal(attempts, 5);
  assert.equal(lines.length, 1, lines.join('\n'));
  assert.match(lines[0], /^test: RabbitMQ unavailable \(no RabbitMQ node answered \(amqp:\/\/127\.0\.0\.1:1: .*; amqp:\/\/127\.0\.0\.1:2: .*\)\); 3 message\(s\) waiting$/);

  const refusing = new BusReconnect({ url: live, connectionName: 'tgs-test-reconnect', what: 'test: RabbitMQ', log: (l) => lines.push(l), firstDelayMs: 5, maxDelayMs: 20 });
  class Refused extends Error {}
  await assert.rejects(refusing.connect(async () => { throw new Refused('declared otherwise'); }, () => false, (err) => err instanceof Refused), Refused);
});
