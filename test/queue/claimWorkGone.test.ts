import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { ApiClient } from '../../src/client/http.js';

let t: TestApi;
before(async () => {
  // a long-poll far longer than the test: only the worker's going away can end it
  t = await startTestApi({ claimWorkWaitMs: 20_000 });
});
after(async () => {
  await t.close();
});

test('a worker that goes away while its claimWork long-polls claims nothing afterwards; one that stays gets the task', async () => {
  const gone = new AbortController();
  const goneWorker = new ApiClient(t.rootUrl, t.root, gone.signal);
  const waiting = goneWorker.request('queue', 'POST', '/claim-work/tgs-test/gone-worker', { workerGroup: 'g', workerId: 'gone', tasks: 1 });
  const settled = waiting.then(() => 'answered', () => 'aborted');
  await new Promise((r) => setTimeout(r, 300));
  gone.abort();
  assert.equal(await settled, 'aborted');
  // let the API see the closed connection before the task exists
  await new Promise((r) => setTimeout(r, 300));

  const taskId = slugid.nice();
  assert.equal((await t.request('PUT', `/api/queue/v1/task/${taskId}`, { ...fastTask(taskId), workerType: 'gone-worker' })).status, 200);
  await new Promise((r) => setTimeout(r, 1000));
  const status = await t.request('GET', `/api/queue/v1/task/${taskId}/status`);
  assert.equal(status.body.status.state, 'pending', 'the task waits for a worker that is there');

  const claimed = await t.request('POST', '/api/queue/v1/claim-work/tgs-test/gone-worker', { workerGroup: 'g', workerId: 'stays', tasks: 1 });
  assert.equal(claimed.status, 200);
  assert.deepEqual(claimed.body.tasks.map((c: { status: { taskId: string }; workerId: string }) => [c.status.taskId, c.workerId]), [[taskId, 'stays']]);
});
