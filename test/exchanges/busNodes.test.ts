import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type AddressInfo, type Socket } from 'node:net';
import { busNodeName, busNodes, connectBus, safeBusUrl } from '../../src/exchanges/bus.js';

test('AMQP_URL: one node or several, comma-separated; printed and named without credentials', () => {
  const url = 'amqp://u:s3cret@h1:5672, amqp://u:s3cret@h2:5673/vhost ,amqps://u:s3cret@h3';
  assert.deepEqual(busNodes(url), ['amqp://u:s3cret@h1:5672', 'amqp://u:s3cret@h2:5673/vhost', 'amqps://u:s3cret@h3']);
  assert.deepEqual(busNodes('amqp://h'), ['amqp://h']);
  assert.equal(safeBusUrl(url), 'amqp://u:***@h1:5672,amqp://u:***@h2:5673/vhost,amqps://u:***@h3');
  assert.equal(busNodeName('amqp://u:s3cret@h2:5673/vhost'), 'amqp://h2:5673');
  // a URL that does not parse is never printed: it could be all secret
  assert.equal(safeBusUrl('amqp://u:s3cret@[bad'), '(unparsable URL)');
});

test('connectBus tries the nodes in turn: a dead first node is skipped, the node after a lost one is tried first', async () => {
  const dead = 'amqp://guest:guest@127.0.0.1:1';
  const live = process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672';
  const conn = await connectBus(`${dead},${live}`);
  assert.equal(conn.node, busNodeName(live));
  await conn.close();
  // after losing the live node, the dead one is tried first, then the live one again (last)
  const again = await connectBus(`${dead},${live}`, { after: busNodeName(live) });
  assert.equal(again.node, busNodeName(live));
  await again.close();
  await assert.rejects(connectBus(`${dead},amqp://guest:guest@127.0.0.1:2`), (err: Error) => {
    assert.match(err.message, /no RabbitMQ node answered \(amqp:\/\/127\.0\.0\.1:1: .*; amqp:\/\/127\.0\.0\.1:2: .*\)/);
    assert.doesNotMatch(err.message, /guest/);
    return true;
  });
});

test("connectBus with `first`: a node that answered lately is tried before a silent one ahead of it (the heartbeat's)", async () => {
  const live = process.env.AMQP_URL || 'amqp://guest:guest@127.0.0.1:5672';
  // accepts connections and never answers, as a hung node does
  const accepted: Socket[] = [];
  const silent = createServer((socket) => accepted.push(socket));
  await new Promise<void>((resolve) => silent.listen(0, '127.0.0.1', resolve));
  const silentUrl = `amqp://guest:guest@127.0.0.1:${(silent.address() as AddressInfo).port}`;
  try {
    const preferred = await connectBus(`${silentUrl},${live}`, { first: busNodeName(live) });
    assert.equal(preferred.node, busNodeName(live));
    await preferred.close();
    assert.equal(accepted.length, 0, 'the silent node was not tried');
  } finally {
    for (const socket of accepted) socket.destroy();
    silent.close();
  }
});
