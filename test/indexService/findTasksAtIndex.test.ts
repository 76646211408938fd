import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, type Credentials, type TestApi } from '../../support/api.js';

/*
 * findTasksAtIndex (POST /api/index/v1/tasks/indexes, body {indexes}): the entries at the paths named, by path and
 * paged; a path with nothing indexed (or an expired entry) is absent, as Mozilla's taskgraph expects of it
 * (find_task_id_batched); each path needs index:find-task:<path>.
 */

let t: TestApi;
const taskIds: Record<string, string> = {};
const inDays = (n: number) => new Date(Date.now() + n * 86400_000).toISOString();
const URL_PATH = '/api/index/v1/tasks/indexes';

before(async () => {
  t = await startTestApi({ temporalAddress: '127.0.0.1:1' });
  for (const path of ['proj.cache.one', 'proj.cache.two', 'proj.other.three', 'top', 'proj.cache.old']) {
    taskIds[path] = slugid.nice();
    const res = await t.request('PUT', `/api/index/v1/task/${path}`, { taskId: taskIds[path], rank: 1, data: { path }, expires: inDays(1) });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  }
  await t.db.pool.query(`UPDATE indexed_tasks SET expires = now() - interval '1 minute' WHERE namespace = 'proj.cache' AND name = 'old'`);
  // no scopes for callers beyond their own: the anonymous role grants index:find-task:* by default
  const role = await t.request('POST', '/api/auth/v1/roles/anonymous', { description: 'nothing', scopes: [] });
  assert.equal(role.status, 200, JSON.stringify(role.body));
});
after(async () => {
  await t?.close();
});

const find = (indexes: unknown, query = '', credentials?: Credentials | null) => t.request('POST', `${URL_PATH}${query}`, { indexes }, credentials);

test('answers the entries at the paths named, by path; unknown and expired paths are absent, a repeated path answers once', async () => {
  const res = await find(['top', 'proj.other.three', 'proj.cache.missing', 'proj.cache.one', 'proj.cache.old', 'nothing.here', 'proj.cache.one']);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.deepEqual(
    res.body.tasks.map((task: any) => [task.namespace, task.taskId, task.rank, task.data.path]),
    [
      ['proj.cache.one', taskIds['proj.cache.one'], 1, 'proj.cache.one'],
      ['proj.other.three', taskIds['proj.other.three'], 1, 'proj.other.three'],
      ['top', taskIds.top, 1, 'top'],
    ],
  );
  assert.equal(res.body.continuationToken, undefined);
  for (const task of res.body.tasks) assert.ok(Date.parse(task.expires) > Date.now());
  // nothing named, nothing found
  assert.deepEqual((await find([])).body, { tasks: [] });
  assert.deepEqual((await t.request('POST', URL_PATH, {})).body, { tasks: [] });
  assert.deepEqual((await find(['no.such.path'])).body, { tasks: [] });
});

test('pages with limit and continuationToken, the same indexes sent again', async () => {
  const indexes = ['proj.cache.one', 'proj.cache.two', 'proj.other.three', 'top', 'proj.cache.missing'];
  const seen: string[] = [];
  let token: string | undefined;
  let pages = 0;
  do {
    const res = await find(indexes, `?limit=2${token ? `&continuationToken=${token}` : ''}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.ok(res.body.tasks.length <= 2);
    seen.push(...res.body.tasks.map((task: any) => task.namespace));
    token = res.body.continuationToken;
    pages++;
  } while (token);
  assert.equal(pages, 2);
  assert.deepEqual(seen, ['proj.cache.one', 'proj.cache.two', 'proj.other.three', 'top']);
  const bad = await find(indexes, '?continuationToken=AAAA');
  assert.equal(bad.status, 400);
});

test('every path needs index:find-task:<path>: one missing refuses the whole request before any read', async () => {
  const created = await t.request('PUT', '/api/auth/v1/clients/finder', { description: 'finder', expires: inDays(1), scopes: ['index:find-task:proj.cache.*'] });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const finder = { clientId: 'finder', accessToken: created.body.accessToken };
  const allowed = await find(['proj.cache.one', 'proj.cache.missing'], '', finder);
  assert.equal(allowed.status, 200, JSON.stringify(allowed.body));
  assert.deepEqual(allowed.body.tasks.map((task: any) => task.namespace), ['proj.cache.one']);
  const refused = await find(['proj.cache.one', 'proj.other.three'], '', finder);
  assert.equal(refused.status, 403);
  assert.equal(refused.body.code, 'InsufficientScopes');
  assert.match(refused.body.message, /index:find-task:proj\.other\.three/);
  const anonymous = await find(['proj.cache.one'], '', null);
  assert.equal(anonymous.status, 403, 'the anonymous role, as in Taskcluster');
  assert.equal(anonymous.body.code, 'InsufficientScopes');
});

test('refuses what is not a list of index paths, or too many of them, with 400', async () => {
  for (const indexes of [['bad..path'], ['a/b'], ['x'.repeat(256)], ['a\u0000b'], [7], 'proj.cache.one', Array.from({ length: 10_001 }, (_, i) => `p.${i}`)]) {
    const res = await find(indexes);
    assert.equal(res.status, 400, `${JSON.stringify(indexes).slice(0, 80)}: ${JSON.stringify(res.body).slice(0, 300)}`);
    assert.match(res.body.code, /^(InputError|InputValidationError)$/);
  }
  // Taskcluster's body names them `indexes`
  assert.equal((await t.request('POST', URL_PATH, { indexPaths: ['top'] })).status, 400);
  // 10,000 paths are fine
  const many = await find(Array.from({ length: 10_000 }, (_, i) => `p.${i}`));
  assert.equal(many.status, 200, JSON.stringify(many.body).slice(0, 300));
  assert.deepEqual(many.body.tasks, []);
});
