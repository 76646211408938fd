import { test } from 'node:test';
import assert from 'node:assert/strict';
import { bridgeBindings, bridgeQueueName, parseDelivery, parseQueueMessage } from '../../src/bridge/messages.js';

const completed = (runs: { state: string; reasonResolved?: string }[], runId: number) => ({ status: { taskId: 'T', runs }, runId });

test('parseQueueMessage: resolutions of the latest run only, with their reason', () => {
  assert.deepEqual(parseQueueMessage('queue/v1/task-failed', completed([{ state: 'failed' }], 0)), {
    kind: 'resolution',
    taskId: 'T',
    resolution: { taskId: 'T', runId: 0, state: 'failed' },
  });
  assert.deepEqual(parseQueueMessage('queue/v1/task-exception', completed([{ state: 'exception', reasonResolved: 'canceled' }], 0))?.resolution, {
    taskId: 'T',
    runId: 0,
    state: 'exception',
    reasonResolved: 'canceled',
  });
  // run 0's exception after which the queue retried: run 1 exists, so run 0 is not final
  assert.equal(parseQueueMessage('queue/v1/task-exception', completed([{ state: 'exception' }, { state: 'pending' }], 0)), undefined);
  // not a resolution exchange, or no runId
  assert.equal(parseQueueMessage('queue/v1/task-pending', completed([{ state: 'pending' }], 0)), undefined);
  assert.equal(parseQueueMessage('queue/v1/task-completed', { status: { taskId: 'T', runs: [{ state: 'completed' }] } }), undefined);
  assert.equal(parseQueueMessage('queue/v1/task-completed', { status: { taskId: 5 } }), undefined);
});

test('parseQueueMessage: the dependent-task-defined notice and an old binding\'s task-defined', () => {
  assert.deepEqual(parseQueueMessage('tgs/v1/dependent-task-defined', { taskId: 'D' }), { kind: 'defined', taskId: 'D' });
  assert.equal(parseQueueMessage('tgs/v1/dependent-task-defined', { taskId: ['D'] }), undefined);
  assert.deepEqual(parseQueueMessage('queue/v1/task-defined', { status: { taskId: 'D', runs: [] } }), { kind: 'defined', taskId: 'D' });
});

test('parseDelivery: strips the deployment prefix; another prefix or a body that is not JSON parses as nothing', () => {
  const body = Buffer.from(JSON.stringify(completed([{ state: 'completed' }], 0)));
  assert.equal(parseDelivery('p/', 'p/queue/v1/task-completed', body)?.kind, 'resolution');
  assert.equal(parseDelivery('p/', 'q/queue/v1/task-completed', body), undefined);
  assert.equal(parseDelivery('', 'queue/v1/task-completed', Buffer.from('{not json')), undefined);
  assert.equal(parseDelivery('', 'queue/v1/task-completed', Buffer.from('null')), undefined);
});

test('bridgeQueueName and bridgeBindings: one queue per deployment, bound by scheduler id when given', () => {
  assert.equal(bridgeQueueName({ exchangePrefix: 'x/', schedulerId: 's' }), 'x/tgs/scheduler-bridge/s');
  assert.deepEqual(bridgeBindings({ bridgeSchedulerIds: [] }), ['#']);
  assert.deepEqual(bridgeBindings({ bridgeSchedulerIds: ['a', 'b'] }), ['*.*.*.*.*.*.a.#', '*.*.*.*.*.*.b.#']);
});
