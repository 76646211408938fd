import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { eventually } from '../../support/stack.js';
import { fastTask } from '../../support/graphs.js';
import { outboxCount } from '../../support/db.js';
import { findTask } from '../../src/indexService/store.js';
import { useStack } from '../helpers/stackFixture.js';

// Indexing on completion, end to end: a graph on Temporal, its tasks run by a worker over the queue API, the relay
// publishing their messages to RabbitMQ and indexing the completed ones as it deletes their outbox rows.

const stack = useStack({ worker: { concurrency: 2 } });

const inDays = (n: number) => new Date(Date.now() + n * 24 * 3600 * 1000).toISOString();
const find = (path: string) => stack.api.request('GET', `/api/index/v1/task/${path}`, undefined, null);

test('a completed task with index. routes is indexed with its extra.index; a failed one is not', async () => {
  const expires = inDays(2);
  const taskGraphId = slugid.nice();
  const graph = {
    routing: 'index-test',
    tasks: {
      build: { task: { ...fastTask('build'), routes: ['index.my.ns.a', 'index.my.ns.latest'], extra: { index: { rank: 42, data: { revision: 'r1' }, expires } } } },
      broken: { task: { ...fastTask('broken', ['failed']), routes: ['index.my.ns.broken'], extra: { index: { rank: 1 } } } },
    },
  };
  const created = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graph);
  const taskIdOf = (label: string) => created.tasks.find((t) => t.label === label)!.taskId;

  const found = await eventually(async () => {
    const res = await find('my.ns.a');
    return res.status === 200 ? res.body : undefined;
  }, 'my.ns.a indexed');
  assert.deepEqual(found, { namespace: 'my.ns.a', taskId: taskIdOf('build'), rank: 42, data: { revision: 'r1' }, expires: new Date(expires).toISOString() });
  assert.equal((await find('my.ns.latest')).body.taskId, taskIdOf('build'));

  // the failed task: resolved, its messages published (the outbox empty), and still nothing at its path
  await eventually(async () => {
    const status = await stack.api.request('GET', `/api/queue/v1/task/${taskIdOf('broken')}/status`, undefined, null);
    return status.body.status.state === 'failed' && (await outboxCount(stack.api.db.pool)) === 0;
  }, 'the failed task resolved and its messages published');
  const broken = await find('my.ns.broken');
  assert.equal(broken.status, 404);
  assert.equal(broken.body.code, 'ResourceNotFound');
  const listed = await stack.api.request('GET', '/api/index/v1/tasks/my.ns', undefined, null);
  assert.deepEqual(listed.body.tasks.map((t: { namespace: string }) => t.namespace), ['my.ns.a', 'my.ns.latest']);
});

test('a rerun completing again with a lower rank leaves the entry; the stored entry is reusable from code (findTask)', async () => {
  const high = slugid.nice();
  await stack.root.request('index', 'PUT', '/task/reuse.path', { taskId: high, rank: 10, data: {}, expires: inDays(1) });
  const taskId = slugid.nice();
  await stack.root.request('queue', 'PUT', `/task/${taskId}`, { ...fastTask('low'), routes: ['index.reuse.path', 'index.reuse.low'], extra: { index: { rank: 3 } } });
  await eventually(async () => (await find('reuse.low')).status === 200, 'reuse.low indexed');
  const entry = await findTask(stack.api.db.pool, 'reuse.path');
  assert.equal(entry?.taskId, high, 'the higher rank stays');
  assert.equal((await findTask(stack.api.db.pool, 'reuse.low'))?.rank, 3);
});
