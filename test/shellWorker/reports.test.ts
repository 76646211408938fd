import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ReportBatcher } from '../../src/shellWorker/reports.js';
import { TgsApiError, type Resolution, type TgsClient } from '../../src/client/tgsClient.js';

/*
 * The batcher's fallback, for servers that refuse the batch as a whole (404: no such endpoint; 403: an older
 * server asking queue:resolve-task of every item): those reports, and every later one, go out as single calls.
 * The API's side of batching is tested end to end in test/queue/resolutions.test.ts and test/shellWorker.
 */

function refusingClient(status: number, calls: Resolution[][]): TgsClient {
  return {
    async reportResolutions(items: Resolution[]) {
      calls.push(items);
      throw new TgsApiError(status, status === 404 ? 'ResourceNotFound' : 'InsufficientScopes', 'refused');
    },
  } as unknown as TgsClient;
}

for (const status of [404, 403, 401]) {
  test(`a batch refused with ${status} makes every report, then and later, a single call; the switch is logged once`, async () => {
    const calls: Resolution[][] = [];
    const lines: string[] = [];
    const batcher = new ReportBatcher(refusingClient(status, calls), 2, (l) => lines.push(l));
    const singles: string[] = [];
    const report = (taskId: string) => batcher.report({ taskId, runId: 0, outcome: 'completed' }, async () => void singles.push(taskId));
    await Promise.all([report('a'), report('b')]);
    await report('c');
    assert.deepEqual(calls.map((c) => c.map((i) => i.taskId)), [['a', 'b']], 'one batch tried');
    assert.deepEqual(singles.sort(), ['a', 'b', 'c']);
    assert.equal(lines.length, 1);
    assert.match(lines[0], new RegExp(`reporting each run with its own call from now on: the batch of reports was refused \\(${status}`));
  });
}

test('a batch that fails otherwise (a 5xx) rejects its reports for the caller to retry, and batching goes on', async () => {
  const calls: Resolution[][] = [];
  const client = {
    async reportResolutions(items: Resolution[]) {
      calls.push(items);
      if (calls.length === 1) throw new TgsApiError(503, 'ServiceUnavailable', 'try another');
      return items.map((i) => ({ taskId: i.taskId, runId: i.runId, status: {} }));
    },
  } as unknown as TgsClient;
  const batcher = new ReportBatcher(client, 1, () => assert.fail('nothing to log'));
  const single = () => assert.fail('no single call');
  await assert.rejects(batcher.report({ taskId: 'a', runId: 0, outcome: 'completed' }, single), (e: unknown) => e instanceof TgsApiError && e.status === 503);
  await batcher.report({ taskId: 'a', runId: 0, outcome: 'completed' }, single);
  assert.equal(calls.length, 2);
});
