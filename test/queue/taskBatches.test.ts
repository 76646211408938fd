import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import slugid from 'slugid';
import { startTestApi, type Credentials, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';

/*
 * The queue's batch reads (tasks, statuses) and task-queue reads (taskQueueCounts, listPendingTasks,
 * listClaimedTasks) of taskcluster-client 87, over HTTP with Hawk: the repo's pinned client predates them.
 */

let t: TestApi;
before(async () => {
  t = await startTestApi({ claimWorkWaitMs: 100, temporalAddress: '127.0.0.1:1' });
  // every caller holds the `anonymous` role, which grants queue:get-task:* and queue:status:* by default
  const role = await t.request('POST', '/api/auth/v1/roles/anonymous', { description: 'nothing', scopes: [] });
  assert.equal(role.status, 200, JSON.stringify(role.body));
});
after(async () => {
  await t?.close();
});

const q = (method: string, path: string, body?: unknown, credentials?: Credentials | null) => t.request(method, `/api/queue/v1${path}`, body, credentials);
const unique = () => `b-${randomBytes(4).toString('hex')}`;

async function create(workerType: string, name: string, extra: Record<string, unknown> = {}): Promise<string> {
  const taskId = slugid.nice();
  const res = await q('PUT', `/task/${taskId}`, { ...fastTask(name), workerType, ...extra });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return taskId;
}

async function client(scopes: string[]): Promise<Credentials> {
  const clientId = `batches/${unique()}`;
  const res = await t.request('PUT', `/api/auth/v1/clients/${encodeURIComponent(clientId)}`, {
    description: 'batch reads',
    expires: new Date(Date.now() + 3600_000).toISOString(),
    scopes,
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return { clientId, accessToken: res.body.accessToken };
}

/** Every page of a paged call, following continuationToken; each page's items. */
async function pages(call: (token?: string) => Promise<{ status: number; body: any }>, field: string): Promise<any[][]> {
  const all: any[][] = [];
  let token: string | undefined;
  do {
    const res = await call(token);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    all.push(res.body[field]);
    token = res.body.continuationToken;
    assert.ok(all.length < 50, 'paging ends');
  } while (token !== undefined);
  return all;
}

test('tasks and statuses answer the known taskIds once each, leave out unknown ones, and page with limit and continuationToken', async () => {
  const workerType = unique();
  const known = [];
  for (let i = 0; i < 5; i++) known.push(await create(workerType, `batch-${i}`));
  const unknown = [slugid.nice(), slugid.nice(), 'not-a-task-id', ''];
  const taskIds = [unknown[0], ...known, known[0], ...unknown.slice(1)];

  const all = await q('POST', '/tasks', { taskIds });
  assert.equal(all.status, 200, JSON.stringify(all.body));
  assert.deepEqual(all.body.tasks.map((x: { taskId: string }) => x.taskId).sort(), [...known].sort());
  assert.equal(all.body.continuationToken, undefined);
  for (const { taskId, task } of all.body.tasks) {
    assert.equal(task.metadata.name, `batch-${known.indexOf(taskId)}`);
    assert.deepEqual(task, (await q('GET', `/task/${taskId}`)).body, 'the definition as task answers it');
  }

  const st = await q('POST', '/tasks/status', { taskIds });
  assert.equal(st.status, 200, JSON.stringify(st.body));
  assert.deepEqual(st.body.statuses.map((x: { taskId: string }) => x.taskId).sort(), [...known].sort());
  for (const { taskId, status } of st.body.statuses) {
    assert.equal(status.taskId, taskId);
    assert.deepEqual(status, (await q('GET', `/task/${taskId}/status`)).body.status, 'the status as status answers it');
  }

  // unknown taskIds between known ones: pages are full but the last, each task once
  const extra = Array.from({ length: 20 }, () => slugid.nice());
  for (const [path, field] of [['/tasks', 'tasks'], ['/tasks/status', 'statuses']] as const) {
    const paged = await pages((token) => q('POST', `${path}?limit=2${token ? `&continuationToken=${token}` : ''}`, { taskIds: [...extra, ...taskIds] }), field);
    assert.deepEqual(paged.map((p) => p.length), [2, 2, 1], `${path}: page sizes`);
    const ids = paged.flat().map((x: { taskId: string }) => x.taskId);
    assert.deepEqual([...ids].sort(), [...known].sort(), `${path}: each known task once`);
  }

  // the most a call may name: 10,000 taskIds (~250 KB), answered in one page of what exists
  const most = [...known, ...Array.from({ length: 10_000 - known.length }, () => slugid.nice())];
  const started = Date.now();
  const big = await q('POST', '/tasks/status', { taskIds: most });
  assert.equal(big.status, 200, JSON.stringify(big.body).slice(0, 300));
  assert.deepEqual(big.body.statuses.map((x: { taskId: string }) => x.taskId).sort(), [...known].sort());
  assert.equal(big.body.continuationToken, undefined);
  assert.ok(Date.now() - started < 5000, `10,000 taskIds took ${Date.now() - started} ms`);
  console.log("BIG", Date.now() - started);

  assert.deepEqual((await q('POST', '/tasks', { taskIds: [] })).body, { tasks: [] });
  assert.deepEqual((await q('POST', '/tasks/status', {})).body, { statuses: [] });
  assert.deepEqual((await q('POST', '/tasks', { taskIds: unknown })).body, { tasks: [] });
});

test('tasks and statuses refuse hostile input with 400 before reading', async () => {
  const many = Array.from({ length: 10_001 }, () => slugid.nice());
  for (const path of ['/tasks', '/tasks/status']) {
    for (const [body, code] of [
      [{ taskIds: many }, 'InputValidationError'],
      [{ taskIds: 'abc' }, 'InputValidationError'],
      [{ taskIds: [1] }, 'InputValidationError'],
      [{ taskIds: ['a\u0000b'] }, 'InputValidationError'],
      [{ taskIds: [], other: 1 }, 'InputValidationError'],
    ] as const) {
      const res = await q('POST', path, body);
      assert.equal(res.status, 400, `${path} ${JSON.stringify(body).slice(0, 80)}: ${JSON.stringify(res.body).slice(0, 300)}`);
      assert.equal(res.body.code, code);
    }
    for (const query of ['continuationToken=AAAA', 'limit=0', 'limit=abc', 'other=1']) {
      const res = await q('POST', `${path}?${query}`, { taskIds: [slugid.nice()] });
      assert.equal(res.status, 400, `${path}?${query}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.code, 'InputError');
    }
  }
});

test('tasks and statuses need the scope of every taskId named, known or not', async () => {
  const workerType = unique();
  const [a, b] = [await create(workerType, 'a'), await create(workerType, 'b')];
  const caller = await client([`queue:get-task:${a}`, `queue:status:${a}`]);

  assert.deepEqual((await q('POST', '/tasks', { taskIds: [a, a] }, caller)).body.tasks.map((x: { taskId: string }) => x.taskId), [a]);
  assert.deepEqual((await q('POST', '/tasks/status', { taskIds: [a] }, caller)).body.statuses.map((x: { taskId: string }) => x.taskId), [a]);
  for (const [path, scope] of [['/tasks', 'queue:get-task'], ['/tasks/status', 'queue:status']]) {
    for (const other of [b, slugid.nice()]) {
      const res = await q('POST', path, { taskIds: [a, other] }, caller);
      assert.equal(res.status, 403, `${path}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.code, 'InsufficientScopes');
      assert.match(res.body.message, new RegExp(`${scope}:${other}`));
      assert.doesNotMatch(res.body.message, new RegExp(`${scope}:${a}`), 'names only what is missing');
    }
    const anonymous = await q('POST', path, { taskIds: [b] }, null);
    // no credentials is the anonymous role, which holds no scope for b here: 403, as in Taskcluster
    assert.equal(anonymous.status, 403, `${path} anonymously: ${JSON.stringify(anonymous.body)}`);
    assert.equal(anonymous.body.code, 'InsufficientScopes');
  }
  // a page's continuationToken does not narrow the check: every taskId is checked on every page
  const page = await q('POST', '/tasks?limit=1', { taskIds: [a, b] });
  assert.ok(page.body.continuationToken);
  const refused = await q('POST', `/tasks?limit=1&continuationToken=${page.body.continuationToken}`, { taskIds: [a, b] }, caller);
  assert.equal(refused.status, 403);
});

test('taskQueueCounts counts pending and claimed tasks, and moves as tasks are claimed and resolved', async () => {
  const workerType = unique();
  const taskQueueId = `tgs-test/${workerType}`;
  const counts = async () => {
    const res = await q('GET', `/task-queues/${encodeURIComponent(taskQueueId)}/counts`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    return res.body;
  };
  assert.deepEqual(await counts(), { provisionerId: 'tgs-test', workerType, taskQueueId, pendingTasks: 0, claimedTasks: 0 });
  for (let i = 0; i < 3; i++) await create(workerType, `count-${i}`);
  assert.deepEqual(await counts(), { provisionerId: 'tgs-test', workerType, taskQueueId, pendingTasks: 3, claimedTasks: 0 });

  const claim = await q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'wg', workerId: 'w1', tasks: 1 });
  assert.equal(claim.body.tasks.length, 1, JSON.stringify(claim.body));
  assert.deepEqual(await counts(), { provisionerId: 'tgs-test', workerType, taskQueueId, pendingTasks: 2, claimedTasks: 1 });
  assert.equal((await q('GET', `/pending/${encodeURIComponent(taskQueueId)}`)).body.pendingTasks, 2, 'as pendingTasks counts');

  const { taskId } = claim.body.tasks[0].status;
  assert.equal((await q('POST', `/task/${taskId}/runs/0/completed`)).status, 200);
  assert.deepEqual(await counts(), { provisionerId: 'tgs-test', workerType, taskQueueId, pendingTasks: 2, claimedTasks: 0 });

  const caller = await client([`queue:pending-count:${taskQueueId}`]);
  const refused = await q('GET', `/task-queues/${encodeURIComponent(taskQueueId)}/counts`, undefined, caller);
  assert.equal(refused.status, 403, 'both scopes needed');
  assert.match(refused.body.message, /queue:claimed-count:tgs-test\//);
});

test('listPendingTasks lists in claim order (priority, then FIFO) and listClaimedTasks the claimed runs, both paged', async () => {
  const workerType = unique();
  const taskQueueId = encodeURIComponent(`tgs-test/${workerType}`);
  const low = [];
  for (let i = 0; i < 3; i++) low.push(await create(workerType, `low-${i}`));
  const high = await create(workerType, 'high', { priority: 'high' });
  const expected = [high, ...low];

  const list = (which: string, limit?: number) => (token?: string) => {
    const search = new URLSearchParams({ ...(limit ? { limit: String(limit) } : {}), ...(token ? { continuationToken: token } : {}) }).toString();
    return q('GET', `/task-queues/${taskQueueId}/${which}${search ? `?${search}` : ''}`);
  };
  const whole = await pages(list('pending'), 'tasks');
  assert.equal(whole.length, 1);
  assert.deepEqual(whole[0].map((x: { taskId: string }) => x.taskId), expected);
  for (const item of whole[0]) {
    assert.deepEqual(Object.keys(item).sort(), ['inserted', 'runId', 'task', 'taskId']);
    assert.equal(item.runId, 0);
    const status = (await q('GET', `/task/${item.taskId}/status`)).body.status;
    assert.equal(item.inserted, status.runs[0].scheduled);
    assert.equal(item.task.metadata.name, (await q('GET', `/task/${item.taskId}`)).body.metadata.name);
  }
  const paged = await pages(list('pending', 1), 'tasks');
  assert.deepEqual(paged.map((p) => p.length), [1, 1, 1, 1]);
  assert.deepEqual(paged.flat().map((x: { taskId: string }) => x.taskId), expected);

  assert.deepEqual((await list('claimed')()).body, { tasks: [] });
  const claim = await q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'wg', workerId: 'w1', tasks: 2 });
  assert.deepEqual(claim.body.tasks.map((x: { status: { taskId: string } }) => x.status.taskId), [high, low[0]]);
  await new Promise((r) => setTimeout(r, 20));
  const reclaim = await q('POST', `/task/${high}/runs/0/reclaim`);
  assert.equal(reclaim.status, 200, JSON.stringify(reclaim.body));

  assert.deepEqual((await pages(list('pending', 1), 'tasks')).flat().map((x: { taskId: string }) => x.taskId), low.slice(1), 'the claimed are pending no more');
  const claimed = await pages(list('claimed', 1), 'tasks');
  assert.deepEqual(claimed.map((p) => p.length), [1, 1]);
  // oldest claim or reclaim first: `high` was reclaimed after both were claimed
  assert.deepEqual(claimed.flat().map((x: { taskId: string }) => x.taskId), [low[0], high]);
  for (const item of claimed.flat()) {
    assert.deepEqual(Object.keys(item).sort(), ['claimed', 'runId', 'task', 'taskId', 'workerGroup', 'workerId']);
    assert.equal(item.runId, 0);
    assert.equal(item.workerGroup, 'wg');
    assert.equal(item.workerId, 'w1');
    const run = (await q('GET', `/task/${item.taskId}/status`)).body.status.runs[0];
    assert.ok(item.claimed >= run.started && new Date(item.claimed).getTime() <= Date.now(), `claimed ${item.claimed}, started ${run.started}`);
  }
  const byId = Object.fromEntries(claimed.flat().map((x: { taskId: string; claimed: string }) => [x.taskId, x.claimed]));
  assert.ok(byId[high] > byId[low[0]], 'a reclaim renews `claimed`');

  // resolved: claimed no more
  assert.equal((await q('POST', `/task/${low[0]}/runs/0/completed`)).status, 200);
  assert.deepEqual((await list('claimed')()).body.tasks.map((x: { taskId: string }) => x.taskId), [high]);
});

test('the task-queue reads refuse a bad taskQueueId or continuationToken with 400', async () => {
  for (const which of ['counts', 'pending', 'claimed']) {
    for (const taskQueueId of ['no-slash', encodeURIComponent('a/b/c'), encodeURIComponent(`x/${'y'.repeat(39)}`), encodeURIComponent('a/b c')]) {
      const res = await q('GET', `/task-queues/${taskQueueId}/${which}`);
      assert.equal(res.status, 400, `${which} ${taskQueueId}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.code, 'InputError');
    }
  }
  const forged = (key: string) => Buffer.from(key).toString('base64url');
  for (const which of ['pending', 'claimed']) {
    for (const token of ['AAAA', forged('x'), forged('9 2026-01-01T00:00:00.000000Z abc'), forged('2026-13-01 abc'), forged('2026-02-30T00:00:00.000000Z abc'), forged('1 2026-13-01T00:00:00.000000Z abc'), forged('1 2026-01-01T00:00:00.000000Z')]) {
      const res = await q('GET', `/task-queues/tgs-test%2Fx/${which}?continuationToken=${token}`);
      assert.equal(res.status, 400, `${which} token ${token}: ${JSON.stringify(res.body)}`);
      assert.equal(res.body.code, 'InputError');
    }
  }
});
