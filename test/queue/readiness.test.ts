import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { readyTasks } from '../../src/queue/readiness.js';

/*
 * readyTasks: what the scheduler checks in the queue's stored state before it schedules anything, and the start
 * of each ready task's hop (the latest resolution among its dependencies).
 */

let t: TestApi;
before(async () => {
  t = await startTestApi({ temporalAddress: '127.0.0.1:1' });
});
after(async () => {
  await t.close();
});

const q = (method: string, path: string, body?: unknown) => t.request(method, `/api/queue/v1${path}`, body);

async function createTask(workerType: string, extra: Record<string, unknown> = {}): Promise<string> {
  const taskId = slugid.nice();
  const res = await q('PUT', `/task/${taskId}`, { ...fastTask('t'), workerType, ...extra });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return taskId;
}

test('ready: every dependency resolved as `requires` demands, a missing one never; each with its latest dependency resolution', async () => {
  const workerType = `ready-${slugid.nice().slice(0, 8)}`;
  const a = await createTask(workerType);
  const b = await createTask(workerType);
  const waiting = await createTask(`${workerType}-idle`);
  const claim = await q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'g', workerId: 'w', tasks: 2 });
  assert.equal(claim.body.tasks.length, 2);
  assert.equal((await q('POST', `/task/${a}/runs/0/completed`)).status, 200);
  await new Promise((resolve) => setTimeout(resolve, 20));
  assert.equal((await q('POST', `/task/${b}/runs/0/failed`)).status, 200);
  const resolvedAt = async (taskId: string) => Date.parse((await q('GET', `/task/${taskId}/status`)).body.status.runs[0].resolved);

  const later = { workerType: `${workerType}-later` };
  const onA = await createTask(workerType, { ...later, dependencies: [a] });
  const onBothCompleted = await createTask(workerType, { ...later, dependencies: [a, b] });
  const onBothResolved = await createTask(workerType, { ...later, dependencies: [a, b], requires: 'all-resolved' });
  const onWaiting = await createTask(workerType, { ...later, dependencies: [a, waiting], requires: 'all-resolved' });
  const root = await createTask(workerType, later);
  const onGone = await createTask(workerType, { ...later, dependencies: [a] });
  await t.db.pool.query('INSERT INTO task_dependencies (required_task_id, dependent_task_id) VALUES ($1, $2)', [slugid.nice(), onGone]);

  const ready = await readyTasks(t.db.pool, [onA, onBothCompleted, onBothResolved, onWaiting, root, onGone]);
  assert.deepEqual(
    [...ready.keys()].sort(),
    [onA, onBothResolved, root].sort(),
    'a failed dependency blocks all-completed, an unresolved or missing one blocks both',
  );
  assert.equal(ready.get(onA), await resolvedAt(a));
  assert.equal(ready.get(onBothResolved), Math.max(await resolvedAt(a), await resolvedAt(b)));
  assert.ok((await resolvedAt(b)) > (await resolvedAt(a)));
  assert.equal(ready.get(root), null, 'no dependencies: ready, no hop');
});
