import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config.js';
import { allExchangeNames, queueExchangeName } from '../../src/exchanges/exchanges.js';
import { checkBatch, outboxMessage, publishable, type PublishContext } from '../../src/relay/outboxMessage.js';
import type { OutboxRow } from '../../src/relay/outboxStore.js';
import { completedExchange } from '../../src/indexService/completions.js';

const config = loadConfig({}, { exchangePrefix: 'unit/' });
const context: PublishContext = { config, declared: new Set(allExchangeNames(config.exchangePrefix)), indexed: completedExchange(config.exchangePrefix) };
const completed = queueExchangeName(config.exchangePrefix, 'task-completed');

/** A row written whole (render NULL), as enqueueMessages writes it. */
function written(id: number, fields: Partial<OutboxRow> = {}): OutboxRow {
  return { id, message_id: `m-${id}`, exchange: completed, routing_key: `t${id}.0._._.p.w.s.g._`, cc: [], payload: { n: id }, render: null, ...fields };
}

/** A row written for rendering, as a claim writes it: the task row snapshot as JSON, and the run. */
function rendered(id: number, runId = 0, snapshot: Record<string, unknown> = {}): OutboxRow {
  const row = {
    task_id: `T${id}`, task_group_id: 'G', scheduler_id: 's', provisioner_id: 'p', worker_type: 'w', priority: 'lowest',
    retries: 5, retries_left: 5, deadline: '2030-01-01T00:00:00.000Z', expires: '2031-01-01T00:00:00.000Z', state: 'running',
    runs: [{ runId: 0, state: 'running', reasonCreated: 'scheduled', workerGroup: 'wg', workerId: 'wi', takenUntil: '2030-01-01T00:00:00.000Z', scheduled: '2029-01-01T00:00:00.000Z' }],
    taken_until: '2030-01-01T00:00:00.000Z', routing: null, routes: [], tags: {}, project_id: 'none', ...snapshot,
  };
  return { id, message_id: `T${id}/0/task-running`, exchange: '', routing_key: '', cc: [], payload: { row, runId }, render: 'task-running' };
}

test('a good row is publishable as it was written, or as rendered from its snapshot', () => {
  assert.deepEqual(publishable(context, written(1)), { message: outboxMessage(config, written(1)), index: undefined });
  const checked = publishable(context, rendered(2));
  assert.equal(checked.reason, undefined);
  assert.equal(checked.message?.exchange, queueExchangeName(config.exchangePrefix, 'task-running'));
  assert.equal(checked.message?.routingKey, 'T2.0.wg.wi.p.w.s.G._');
});

test('a row whose snapshot fails the message schema, or is no task row, can never be published', () => {
  // runId 70: past Taskcluster's 50 runs, which the message schema refuses
  assert.match(publishable(context, rendered(3, 70)).reason ?? '', /^cannot be rendered as a task-running message: message does not match its schema/);
  const notARow = { ...rendered(4), payload: { something: 'else' } };
  assert.match(publishable(context, notARow).reason ?? '', /^cannot be rendered as a task-running message: /);
  const unknownRender = { ...rendered(5), render: 'task-bogus' as OutboxRow['render'] };
  // rendered, but for an exchange that does not exist
  assert.match(publishable(context, unknownRender).reason ?? '', /exchange "unit\/queue\/v1\/task-bogus" is not one the relay declares/);
});

test('a row naming an exchange the relay does not declare, or too long a routing key or message id, can never be published', () => {
  assert.match(publishable(context, written(6, { exchange: 'other/queue/v1/task-completed' })).reason ?? '', /exchange "other\/queue\/v1\/task-completed" is not one the relay declares/);
  assert.equal(publishable(context, written(7, { routing_key: 'k'.repeat(255) })).reason, undefined, '255 bytes are allowed');
  assert.match(publishable(context, written(8, { routing_key: 'é'.repeat(128) })).reason ?? '', /routing key is 256 bytes long; AMQP allows 255/);
  assert.match(publishable(context, written(9, { message_id: 'x'.repeat(256) })).reason ?? '', /message id is 256 bytes long/);
});

test('a completion with an index route names its task for indexing; one whose payload has no status is unpublishable', () => {
  const indexed = written(10, { cc: ['route.index.a.b'], payload: { status: { taskId: 'T10' } } });
  assert.equal(publishable(context, indexed).index, 'T10');
  assert.match(publishable(context, written(11, { cc: ['route.index.a.b'], payload: {} })).reason ?? '', /^cannot be rendered/);
});

test("a batch's unpublishable rows are sorted out; the others keep their order", () => {
  const rows = [written(1), rendered(2, 70), written(3, { cc: ['route.index.x'], payload: { status: { taskId: 'T3' } } }), written(4, { exchange: 'nope' }), rendered(5)];
  const batch = checkBatch(context, rows);
  assert.deepEqual(batch.publish.map((p) => p.row.id), [1, 3, 5]);
  assert.deepEqual(batch.dead.map((d) => d.row.id), [2, 4]);
  assert.deepEqual(batch.toIndex, ['T3']);
});
