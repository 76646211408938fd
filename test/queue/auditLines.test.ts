import { test } from 'node:test';
import assert from 'node:assert/strict';
import { logClaimed, logResolved } from '../../src/queue/auditLines.js';

function capture() {
  const lines: { fields: Record<string, unknown>; line: string }[] = [];
  return { lines, log: { info: (fields: object, line: string) => void lines.push({ fields: fields as Record<string, unknown>, line }) } };
}

test('a claim is one `tasks claimed` line naming its runs in order, and a claim that took nothing has none', () => {
  const { lines, log } = capture();
  logClaimed(log, { workerGroup: 'g', workerId: 'w' }, [
    { taskId: 'a', runId: 0, taskGroupId: 'G' },
    { taskId: 'b', runId: 2, taskGroupId: 'G' },
    { taskId: 'c', runId: 1, taskGroupId: 'H' },
  ]);
  logClaimed(log, { workerGroup: 'g', workerId: 'w' }, []);
  assert.deepEqual(lines, [{ line: 'tasks claimed', fields: { taskIds: ['a', 'b', 'c'], runIds: [0, 2, 1], taskGroupIds: ['G', 'H'], workerGroup: 'g', workerId: 'w' } }]);
});

test('resolutions are one line per outcome and exception reason, in the order each first appears', () => {
  const { lines, log } = capture();
  logResolved(log, [
    { taskId: 'a', runId: 0, taskGroupId: 'G', outcome: 'completed' },
    { taskId: 'b', runId: 0, taskGroupId: 'G', outcome: 'exception', reason: 'malformed-payload' },
    { taskId: 'c', runId: 1, taskGroupId: 'G', outcome: 'completed' },
    { taskId: 'd', runId: 0, taskGroupId: 'H', outcome: 'exception', reason: 'resource-unavailable' },
  ]);
  assert.deepEqual(lines, [
    { line: 'tasks completed', fields: { taskIds: ['a', 'c'], runIds: [0, 1], taskGroupIds: ['G'], state: 'completed' } },
    { line: 'tasks exception', fields: { taskIds: ['b'], runIds: [0], taskGroupIds: ['G'], state: 'exception', reason: 'malformed-payload' } },
    { line: 'tasks exception', fields: { taskIds: ['d'], runIds: [0], taskGroupIds: ['H'], state: 'exception', reason: 'resource-unavailable' } },
  ]);
});
