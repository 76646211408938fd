import { test } from 'node:test';
import assert from 'node:assert/strict';
import { BRIDGE_DELIVERY_LIMIT, bridgeDeadLetterName, bridgeQueueArguments, queueMismatchAdvice } from '../../src/bridge/bridgeQueue.js';

const config = { exchangePrefix: 'p/', schedulerId: 's' };

test('a quorum bridge queue has a delivery limit and dead-letters to its own exchange; a classic one has no arguments', () => {
  assert.deepEqual(bridgeQueueArguments({ ...config, bridgeQueueType: 'quorum' }), {
    'x-queue-type': 'quorum',
    'x-delivery-limit': BRIDGE_DELIVERY_LIMIT,
    'x-dead-letter-exchange': 'p/tgs/scheduler-bridge-dead/s',
    'x-dead-letter-routing-key': 'dead',
  });
  assert.equal(bridgeDeadLetterName(config), 'p/tgs/scheduler-bridge-dead/s');
  // what every bridge before quorum queues declared: such a queue is declared unchanged
  assert.deepEqual(bridgeQueueArguments({ ...config, bridgeQueueType: 'classic' }), {});
});

test("a type mismatch says which type the queue has and both ways out (RabbitMQ 3.10's messages)", () => {
  const classicExists = queueMismatchAdvice(
    'p/tgs/scheduler-bridge/s',
    'quorum',
    "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'p/tgs/scheduler-bridge/s' in vhost '/': received the value 'quorum' of type 'longstr' but current is none",
  );
  assert.match(classicExists, /it exists as a classic queue/);
  assert.match(classicExists, /set TGS_BRIDGE_QUEUE_TYPE=classic/);
  assert.match(classicExists, /rabbitmqctl delete_queue 'p\/tgs\/scheduler-bridge\/s'/);
  assert.match(classicExists, /docs\/deployments\.md, "The bridge queue: classic to quorum"/);
  const quorumExists = queueMismatchAdvice(
    'q',
    'classic',
    "PRECONDITION_FAILED - inequivalent arg 'x-queue-type' for queue 'q' in vhost '/': received none but current is the value 'quorum' of type 'longstr'",
  );
  assert.match(quorumExists, /it exists as a quorum queue/);
  assert.match(quorumExists, /set TGS_BRIDGE_QUEUE_TYPE=quorum/);
  // what RabbitMQ 3.10 answers when the bridge's quorum arguments meet an earlier bridge's classic queue
  const upgrade = queueMismatchAdvice(
    'q',
    'quorum',
    "PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-exchange' for queue 'q' in vhost '/': received the value 'p/tgs/scheduler-bridge-dead/s' of type 'longstr' but current is none",
  );
  assert.match(upgrade, /it exists as a classic queue/);
  assert.match(upgrade, /set TGS_BRIDGE_QUEUE_TYPE=classic/);
  // AMQP cuts RabbitMQ's text at 255 characters: with a long queue name the end is gone
  const cut = queueMismatchAdvice(
    'q',
    'quorum',
    "Operation failed: QueueDeclare; 406 (PRECONDITION-FAILED) with message \"PRECONDITION_FAILED - inequivalent arg 'x-dead-letter-exchange' for queue 'test-cli18124/tgs/scheduler-bridge/task-graph-scheduler' in vhost '/': received the value 'test-cli18124/tgs/scheduler-bridge-dead/task-graph-scheduler' of type 'longstr' but cu...\"",
  );
  assert.match(cut, /it exists as a classic queue/);
  // another argument (a delivery limit changed by hand): no type to keep, only the way out
  const other = queueMismatchAdvice('q', 'quorum', "PRECONDITION_FAILED - inequivalent arg 'x-delivery-limit' for queue 'q' in vhost '/': received '50' but current is '2'");
  assert.match(other, /it exists with other arguments/);
  assert.doesNotMatch(other, /TGS_BRIDGE_QUEUE_TYPE/);
});
