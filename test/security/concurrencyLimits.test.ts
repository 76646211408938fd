import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';

const LIMIT = 3;
let t: TestApi;
let graphId: string;
let cursor: string;
before(async () => {
  t = await startTestApi({ claimWorkWaitMs: 1500, maxConcurrentGraphChanges: LIMIT, maxConcurrentGraphNodes: 1, maxConcurrentArtifactRequests: 2 });
  graphId = slugid.nice();
  // A graph row is all the changes long-poll reads; with no task changing it waits its full `wait`.
  await t.db.pool.query(`INSERT INTO task_graphs (task_graph_id, scheduler_id) VALUES ($1, 'sec-test')`, [graphId]);
  cursor = (await t.db.pool.query<{ s: string }>('SELECT pg_current_snapshot()::text AS s')).rows[0].s;
});
after(async () => {
  await t.close();
});

/** Waits until `n` queries of this test's database wait for a lock (the requests hold their slots). */
async function waitingOnLock(n: number): Promise<void> {
  for (let i = 0; i < 200; i++) {
    const { rows } = await t.db.pool.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM pg_locks l JOIN pg_database d ON d.oid = l.database WHERE NOT l.granted AND d.datname = current_database()',
    );
    if (rows[0].n >= n) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error(`${n} requests never waited on the lock`);
}

const longPoll = (wait: number) =>
  fetch(`${t.rootUrl}/api/scheduler/v1/task-graph/${graphId}/changes?since=${encodeURIComponent(cursor)}&wait=${wait}`);

test('a flood of anonymous long-polls gets 429 with Retry-After beyond the limit, while claims and reports go on', async () => {
  let settled = 0;
  const flood = Array.from({ length: 20 }, () => longPoll(8));
  const admittedPolls = flood.slice(0, LIMIT).map((p) => p.finally(() => (settled += 1)));
  // Every request beyond the limit is answered at once, in Taskcluster's error shape.
  for (const res of await Promise.all(flood.slice(LIMIT))) {
    assert.equal(res.status, 429);
    assert.equal(res.headers.get('retry-after'), '2');
    const body = (await res.json()) as { code: string; message: string; requestInfo: { method: string } };
    assert.equal(body.code, 'TooManyRequests');
    assert.equal(body.requestInfo.method, 'taskGraphChanges');
    assert.match(body.message, /limit 3/);
  }
  // Meanwhile a worker claims and reports.
  const taskId = slugid.nice();
  assert.equal((await t.request('PUT', `/api/queue/v1/task/${taskId}`, { ...fastTask('t'), workerType: 'lim1' })).status, 200);
  const claim = await t.request('POST', '/api/queue/v1/claim-work/tgs-test/lim1', { workerGroup: 'grp', workerId: 'wkr', tasks: 1 });
  assert.equal(claim.status, 200);
  assert.equal(claim.body.tasks[0].status.taskId, taskId);
  const report = await t.request('POST', `/api/queue/v1/task/${taskId}/runs/0/completed`, undefined, claim.body.tasks[0].credentials);
  assert.equal(report.status, 200, JSON.stringify(report.body));
  assert.equal(settled, 0, 'the admitted long-polls were still waiting');
  // The admitted long-polls answer normally when their wait ends, and free their places.
  for (const res of await Promise.all(admittedPolls)) assert.equal(res.status, 200, await res.text());
  assert.equal((await longPoll(0)).status, 200);
});

test('the nodes endpoint has its own limit', async () => {
  // Hold the one nodes slot: its read waits behind a lock this test takes.
  const locker = await t.db.pool.connect();
  try {
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE graph_nodes IN ACCESS EXCLUSIVE MODE');
    const held = fetch(`${t.rootUrl}/api/scheduler/v1/task-graph/${graphId}/nodes`);
    await waitingOnLock(1);
    assert.equal((await fetch(`${t.rootUrl}/api/scheduler/v1/task-graph/${graphId}/nodes`)).status, 429);
    await locker.query('COMMIT');
    assert.equal((await held).status, 200);
  } finally {
    locker.release();
  }
  assert.equal((await fetch(`${t.rootUrl}/api/scheduler/v1/task-graph/${graphId}/nodes`)).status, 200);
});

test('the artifact endpoints have their own limit', async () => {
  const taskId = slugid.nice();
  assert.equal((await t.request('PUT', `/api/queue/v1/task/${taskId}`, { ...fastTask('t'), workerType: 'lim2' })).status, 200);
  assert.equal((await t.request('POST', '/api/queue/v1/claim-work/tgs-test/lim2', { workerGroup: 'grp', workerId: 'wkr', tasks: 1 })).status, 200);
  const list = `${t.rootUrl}/api/queue/v1/task/${taskId}/runs/0/artifacts`;
  // Hold both artifact slots: their reads wait behind a lock this test takes.
  const locker = await t.db.pool.connect();
  try {
    await locker.query('BEGIN');
    await locker.query('LOCK TABLE artifacts IN ACCESS EXCLUSIVE MODE');
    const held = [fetch(list), fetch(list)];
    await waitingOnLock(2);
    const refused = await fetch(list);
    assert.equal(refused.status, 429);
    assert.equal(refused.headers.get('retry-after'), '2');
    await locker.query('COMMIT');
    for (const res of await Promise.all(held)) assert.equal(res.status, 200);
  } finally {
    locker.release();
  }
  assert.equal((await fetch(list)).status, 200);
});
