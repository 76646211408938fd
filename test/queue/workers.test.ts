import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { buildApi } from '../../src/processes/api.js';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';

let t: TestApi;
before(async () => {
  t = await startTestApi({ claimWorkWaitMs: 300, temporalAddress: '127.0.0.1:1' });
});
after(async () => {
  await t.close();
});

const q = (method: string, path: string, body?: unknown, credentials?: Parameters<TestApi['request']>[3]) => t.request(method, `/api/queue/v1${path}`, body, credentials);
const claim = (workerType: string, workerId: string, tasks = 1) => q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'wg', workerId, tasks });
const create = async (workerType: string) => {
  const taskId = slugid.nice();
  const res = await q('PUT', `/task/${taskId}`, { ...fastTask('w'), workerType });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return taskId;
};

test('a quarantined worker gets no tasks until quarantineUntil; other workers of its queue still do', async () => {
  // the worker must be known before it can be quarantined (Taskcluster)
  const unknown = await q('PUT', '/provisioners/tgs-test/worker-types/wq/workers/wg/bad', { quarantineUntil: new Date(Date.now() + 60_000).toISOString() });
  assert.equal(unknown.status, 404);
  assert.equal(unknown.body.code, 'ResourceNotFound');
  assert.equal((await claim('wq', 'bad')).body.tasks.length, 0);

  const until = new Date(Date.now() + 3000);
  const quarantined = await q('PUT', '/provisioners/tgs-test/worker-types/wq/workers/wg/bad', { quarantineUntil: until.toISOString(), quarantineInfo: 'flaky disk' });
  assert.equal(quarantined.status, 200, JSON.stringify(quarantined.body));
  assert.equal(quarantined.body.quarantineUntil, until.toISOString());
  assert.equal(quarantined.body.quarantineDetails[0].quarantineInfo, 'flaky disk');
  assert.equal(quarantined.body.quarantineDetails[0].clientId, t.root.clientId);

  const taskId = await create('wq');
  assert.deepEqual((await claim('wq', 'bad')).body.tasks, [], 'quarantined: nothing');
  const listed = await q('GET', '/provisioners/tgs-test/worker-types/wq/workers?quarantined=true');
  assert.deepEqual(listed.body.workers.map((w: { workerId: string }) => w.workerId), ['bad']);
  assert.deepEqual((await q('GET', '/provisioners/tgs-test/worker-types/wq/workers?quarantined=false')).body.workers, []);
  const status = await q('GET', `/task/${taskId}/status`);
  assert.equal(status.body.status.state, 'pending', 'the task waits for a worker that is not quarantined');

  while (Date.now() < until.getTime() + 50) await new Promise((r) => setTimeout(r, 100));
  const after = await claim('wq', 'bad');
  assert.deepEqual(after.body.tasks.map((x: { status: { taskId: string } }) => x.status.taskId), [taskId], 'the quarantine ended');

  // a quarantine can be lifted early with a time in the past; another worker is never affected
  await q('PUT', '/provisioners/tgs-test/worker-types/wq/workers/wg/bad', { quarantineUntil: new Date(Date.now() + 3_600_000).toISOString() });
  const other = await create('wq');
  assert.deepEqual((await claim('wq', 'bad')).body.tasks, []);
  await q('PUT', '/provisioners/tgs-test/worker-types/wq/workers/wg/bad', { quarantineUntil: new Date(Date.now() - 1000).toISOString() });
  assert.deepEqual((await claim('wq', 'bad')).body.tasks.map((x: { status: { taskId: string } }) => x.status.taskId), [other]);
  const details = await q('GET', '/provisioners/tgs-test/worker-types/wq/workers/wg/bad');
  assert.equal(details.body.quarantineDetails.length, 3, 'every quarantine call is kept');
});

test('claims record workers and task queues: recent runs (latest 20), lastDateActive, pending count, across pages', async () => {
  const ids: string[] = [];
  for (let i = 0; i < 22; i++) ids.push(await create('wr'));
  for (let i = 0; i < 22; i++) assert.equal((await claim('wr', 'busy')).body.tasks.length, 1);
  await create('wr');
  for (const id of ['a', 'b', 'c']) await claim('wr-idle', id);

  const busy = await q('GET', '/provisioners/tgs-test/worker-types/wr/workers/wg/busy');
  assert.equal(busy.status, 200, JSON.stringify(busy.body));
  assert.equal(busy.body.recentTasks.length, 20, 'Taskcluster keeps the latest 20');
  assert.deepEqual(busy.body.recentTasks.map((r: { taskId: string }) => r.taskId).sort(), ids.slice(2).sort());
  assert.equal(busy.body.taskQueueId, 'tgs-test/wr');

  const queue = await q('GET', `/task-queues/${encodeURIComponent('tgs-test/wr')}`);
  assert.equal(queue.status, 200, JSON.stringify(queue.body));
  assert.equal(queue.body.pendingTasks, 1);
  assert.ok(Date.now() - new Date(queue.body.lastDateActive).getTime() < 60_000);
  const pending = await q('GET', `/pending/${encodeURIComponent('tgs-test/wr')}`);
  assert.deepEqual(pending.body, { provisionerId: 'tgs-test', workerType: 'wr', taskQueueId: 'tgs-test/wr', pendingTasks: 1 });
  assert.deepEqual((await q('GET', '/pending/tgs-test/wr')).body, pending.body, 'the older two-segment form');

  const page1 = await q('GET', '/provisioners/tgs-test/worker-types/wr-idle/workers?limit=2');
  assert.deepEqual(page1.body.workers.map((w: { workerId: string }) => w.workerId), ['a', 'b']);
  assert.equal(page1.body.workers[0].latestTask, undefined, 'an idle worker ran nothing');
  const page2 = await q('GET', `/provisioners/tgs-test/worker-types/wr-idle/workers?limit=2&continuationToken=${page1.body.continuationToken}`);
  assert.deepEqual(page2.body.workers.map((w: { workerId: string }) => w.workerId), ['c']);
  assert.equal(page2.body.continuationToken, undefined);
});

test('worker metadata refuses hostile input with 400 and writes nothing; its reads need Taskcluster\'s scopes', async () => {
  const bad = [
    q('PUT', '/provisioners/tgs-test/worker-types/wh/workers/wg/x', { quarantineUntil: 'tomorrow' }),
    q('PUT', '/provisioners/tgs-test/worker-types/wh/workers/wg/x', { quarantineUntil: new Date().toISOString(), extra: 1 }),
    q('PUT', '/provisioners/tgs-test/worker-types/wh/wg/x', {}),
    q('PUT', '/provisioners/tgs-test/worker-types/wh', { stability: 'solid' }),
    q('PUT', '/provisioners/tgs-test', { actions: [{ name: 'x' }] }),
    q('GET', `/task-queues/${encodeURIComponent('no-slash')}`),
    q('GET', `/pending/${encodeURIComponent('a/b/c')}`),
    q('GET', '/provisioners/tgs-test/worker-types/wh/workers?quarantined=maybe'),
    q('GET', '/task-queues?limit=0'),
    q('GET', '/provisioners/bad%20name'),
  ];
  for (const res of await Promise.all(bad)) {
    assert.equal(res.status, 400, JSON.stringify(res.body));
    assert.match(res.body.code, /^Input(Validation)?Error$/);
  }
  const { rows } = await t.db.pool.query(`SELECT count(*)::int AS n FROM task_queues WHERE task_queue_id = 'tgs-test/wh'`);
  assert.equal(rows[0].n, 0);

  // declaring needs a scope per property given
  const created = await t.request('PUT', `/api/auth/v1/clients/${encodeURIComponent('project/declarer')}`, {
    description: 'declares descriptions only',
    expires: new Date(Date.now() + 3_600_000).toISOString(),
    scopes: ['queue:declare-worker-type:tgs-test/wh#description'],
  });
  const declarer = { clientId: 'project/declarer', accessToken: created.body.accessToken as string };
  const ok = await q('PUT', '/provisioners/tgs-test/worker-types/wh', { description: 'fine' }, declarer);
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  const refused = await q('PUT', '/provisioners/tgs-test/worker-types/wh', { description: 'x', stability: 'stable' }, declarer);
  assert.equal(refused.status, 403);
  assert.match(refused.body.message, /queue:declare-worker-type:tgs-test\/wh#stability/);
  assert.equal((await q('GET', '/provisioners/tgs-test/worker-types/wh')).body.stability, 'experimental');

  // an empty body declares nothing but still creates rows and renews activity: it needs the scope for every
  // property, from anyone (anonymous callers and the declarer above included)
  const provisioners = async () => (await t.db.pool.query(`SELECT count(*)::int AS n FROM provisioners`)).rows[0].n as number;
  const before = await provisioners();
  for (const [path, scope] of [
    ['/provisioners/anon-made', 'queue:declare-provisioner:anon-made#\\*'],
    ['/provisioners/anon-made/worker-types/wt', 'queue:declare-worker-type:anon-made/wt#\\*'],
    ['/provisioners/tgs-test/worker-types/wh', 'queue:declare-worker-type:tgs-test/wh#\\*'],
  ]) {
    const anonymous = await q('PUT', path, {}, null);
    assert.equal(anonymous.status, 403, `${path}: ${JSON.stringify(anonymous.body)}`);
    const partial = await q('PUT', path, {}, declarer);
    assert.equal(partial.status, 403, `${path}: ${JSON.stringify(partial.body)}`);
    assert.match(partial.body.message, new RegExp(scope));
  }
  assert.equal(await provisioners(), before, 'no provisioner was created');
  assert.equal((await q('PUT', '/provisioners/root-made', {})).status, 200, 'root may touch with an empty body');

  // workers are not public (the anonymous role grants task queues and worker types, not workers)
  assert.equal((await q('GET', '/provisioners/tgs-test/worker-types/wh', undefined, null)).status, 200);
  assert.equal((await q('GET', '/provisioners/tgs-test/worker-types/wr/workers', undefined, null)).status, 403);
});

test('__heartbeat__ names the backing service that does not answer (503); __lbheartbeat__ and __version__ answer 200', async () => {
  // this file runs no Temporal server: port 1 refuses, as does a RabbitMQ URL nobody listens on
  const api = await buildApi({ ...t.config, port: 0, temporalAddress: '127.0.0.1:1', amqpUrl: 'amqp://guest:guest@127.0.0.1:1' });
  const url = (await api.listen()).replace('[::1]', '127.0.0.1');
  try {
    for (const service of ['queue', 'auth']) {
      const heartbeat = await fetch(`${url}/api/${service}/v1/__heartbeat__`);
      assert.equal(heartbeat.status, 503);
      const body = (await heartbeat.json()) as { code: string; message: string; details: { services: Record<string, { ok: boolean }> } };
      assert.equal(body.code, 'ServiceUnavailable');
      assert.match(body.message, /temporal/);
      assert.match(body.message, /rabbitmq/);
      assert.doesNotMatch(body.message, /postgres/);
      assert.equal(body.details.services.postgres.ok, true);
      assert.equal((await fetch(`${url}/api/${service}/v1/__lbheartbeat__`)).status, 200);
      const version = (await (await fetch(`${url}/api/${service}/v1/__version__`)).json()) as { version: string };
      assert.match(version.version, /^\d+\.\d+\.\d+/);
    }
  } finally {
    await api.close();
  }
  // with RabbitMQ up and only Temporal missing, only Temporal is named
  const heartbeat = await q('GET', '/__heartbeat__', undefined, null);
  assert.equal(heartbeat.status, 503);
  assert.match(heartbeat.body.message, /^Unreachable: temporal/);
  assert.equal(heartbeat.body.details.services.rabbitmq.ok, true);
});

test('expired worker metadata is deleted; a quarantined worker stays while its quarantine lasts', async () => {
  const { deleteExpired } = await import('../../src/queue/workers.js');
  await t.db.pool.query(`INSERT INTO task_queues (task_queue_id, provisioner_id, worker_type, expires, last_date_active) VALUES
    ('old/q', 'old', 'q', now() - interval '1 minute', now() - interval '6 days'), ('new/q', 'new', 'q', now() + interval '1 day', now())`);
  await t.db.pool.query(`INSERT INTO workers (task_queue_id, worker_group, worker_id, first_claim, last_date_active, expires, quarantine_until) VALUES
    ('new/q', 'g', 'gone', now(), now(), now() - interval '1 minute', NULL),
    ('new/q', 'g', 'held', now(), now(), now() - interval '1 minute', now() + interval '1 hour'),
    ('new/q', 'g', 'live', now(), now(), now() + interval '1 hour', NULL)`);
  await deleteExpired(t.db.pool);
  const queues = await t.db.pool.query(`SELECT task_queue_id FROM task_queues WHERE task_queue_id IN ('old/q', 'new/q')`);
  assert.deepEqual(queues.rows.map((r) => r.task_queue_id), ['new/q']);
  const workers = await t.db.pool.query(`SELECT worker_id FROM workers WHERE task_queue_id = 'new/q' ORDER BY worker_id`);
  assert.deepEqual(workers.rows.map((r) => r.worker_id), ['held', 'live']);
});
