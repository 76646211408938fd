import { test } from 'node:test';
import assert from 'node:assert/strict';
import { stopInOrder } from '../../src/cli/stopInOrder.js';

const wait = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

test('stopInOrder stops the last started first, names a part while it takes its time, and goes on past one that fails', async () => {
  const order: string[] = [];
  const progress: string[] = [];
  const errors: string[] = [];
  await stopInOrder(
    [
      { name: 'the API', run: async () => void order.push('api') },
      { name: 'the scheduler worker', run: async () => (order.push('worker'), wait(250)) },
      { name: 'the bridge', run: async () => (order.push('bridge'), Promise.reject(new Error('channel closed'))) },
    ],
    { progress: (l) => progress.push(l), error: (l) => errors.push(l) },
    50,
  );
  assert.deepEqual(order, ['bridge', 'worker', 'api']);
  assert.deepEqual(errors, ['stopping the bridge: channel closed']);
  // only the slow part is named while it stops, each line saying how long so far
  assert.ok(progress.length >= 1, 'the slow part was named');
  for (const line of progress) assert.match(line, /^stopping the scheduler worker \(\d+ s so far\)$/);
});
