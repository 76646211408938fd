import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import taskcluster from 'taskcluster-client';
import { buildApi, type ApiApp } from '../../src/processes/api.js';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';

let t: TestApi;
let second: ApiApp;
let secondUrl: string;
before(async () => {
  t = await startTestApi();
  // a second API process on the same database: role changes made through the first must hold here too
  second = await buildApi({ ...t.config, port: 0 }, { validateOutput: true });
  secondUrl = (await second.listen()).replace('[::1]', '127.0.0.1');
});
after(async () => {
  await second.close();
  await t.close();
});

type Creds = { clientId: string; accessToken: string; certificate?: string };
const authWith = (credentials: Creds, rootUrl = t.rootUrl) => new taskcluster.Auth({ rootUrl, credentials, retries: 0 });
const queueWith = (credentials: Creds, options: Record<string, unknown> = {}, rootUrl = t.rootUrl) =>
  new taskcluster.Queue({ rootUrl, credentials, retries: 0, ...options });
const expires = () => taskcluster.fromNowJSON('1 hour');

async function makeClient(clientId: string, scopes: string[]): Promise<Creds> {
  const created = await authWith(t.root).createClient(clientId, { description: clientId, expires: expires(), scopes });
  return { clientId, accessToken: created.accessToken };
}

const ciTask = (workerType: string) => ({ ...fastTask('role-test'), workerType, schedulerId: 'ci' });

async function refusedWith(promise: Promise<unknown>, status: number, code: string): Promise<string> {
  let message = '';
  await assert.rejects(promise, (err: Error & { statusCode?: number; code?: string }) => {
    assert.equal(err.statusCode, status, err.message);
    assert.equal(err.code, code);
    message = err.message;
    return true;
  });
  return message;
}

test('a client holding assume:project:ci creates what the role permits; a role change holds from the next request, in every API process', async () => {
  const bot = await makeClient('project/ci-bot', ['assume:project:ci']);
  const queue = queueWith(bot);
  const queue2 = queueWith(bot, {}, secondUrl);
  await refusedWith(queue.createTask(slugid.nice(), ciTask('ci')), 403, 'InsufficientScopes');

  const role = await authWith(t.root).createRole('project:ci', {
    description: 'CI may create tasks in tgs-test/ci',
    scopes: ['queue:create-task:lowest:tgs-test/ci', 'queue:scheduler-id:ci'],
  });
  assert.deepEqual(role.expandedScopes, ['assume:project:ci', 'queue:create-task:lowest:tgs-test/ci', 'queue:scheduler-id:ci']);
  const created = await queue.createTask(slugid.nice(), ciTask('ci'));
  assert.equal(created.status.state, 'pending');
  assert.equal((await queue2.createTask(slugid.nice(), ciTask('ci'))).status.state, 'pending', 'the other process sees the new role at once');

  const current = await authWith(bot).currentScopes().catch((err: Error) => err);
  assert.ok(current instanceof Error, 'auth:current-scopes is not granted by the role');

  // the role moves to another worker type: the very next request of the same client is judged by it
  await authWith(t.root).updateRole('project:ci', {
    description: 'CI moved',
    scopes: ['queue:create-task:lowest:tgs-test/ci2', 'queue:scheduler-id:ci'],
  });
  await refusedWith(queue.createTask(slugid.nice(), ciTask('ci')), 403, 'InsufficientScopes');
  await refusedWith(queue2.createTask(slugid.nice(), ciTask('ci')), 403, 'InsufficientScopes');
  assert.equal((await queue2.createTask(slugid.nice(), ciTask('ci2'))).status.state, 'pending');

  // temporary credentials and authorizedScopes are judged by the expanded scopes too
  const temp = taskcluster.createTemporaryCredentials({
    credentials: bot,
    start: new Date(Date.now() - 60_000),
    expiry: new Date(Date.now() + 3_600_000),
    scopes: ['queue:create-task:lowest:tgs-test/ci2', 'queue:scheduler-id:ci'],
  });
  assert.equal((await queueWith(temp).createTask(slugid.nice(), ciTask('ci2'))).status.state, 'pending');
  const restricted = queueWith(bot, { authorizedScopes: ['queue:create-task:lowest:tgs-test/ci2', 'queue:scheduler-id:ci'] });
  assert.equal((await restricted.createTask(slugid.nice(), ciTask('ci2'))).status.state, 'pending');
  const overreaching = queueWith(bot, { authorizedScopes: ['queue:create-task:lowest:tgs-test/ci'] });
  await refusedWith(overreaching.createTask(slugid.nice(), ciTask('ci')), 401, 'AuthenticationFailed');

  await authWith(t.root).deleteRole('project:ci');
  await refusedWith(queue2.createTask(slugid.nice(), ciTask('ci2')), 403, 'InsufficientScopes');
  const { rows } = await t.db.pool.query(`SELECT count(*)::int AS n FROM tasks WHERE definition->>'schedulerId' = 'ci'`);
  assert.equal(rows[0].n, 5, 'exactly the permitted tasks exist');
});

test('createRole needs the role\'s scopes; updateRole needs only the added ones; cycles, ** and conflicts are refused', async () => {
  const admin = await makeClient('project/role-admin', ['auth:create-role:team:*', 'auth:update-role:team:*', 'queue:route:a.*', 'auth:get-role:*']);
  const auth = authWith(admin);
  await refusedWith(auth.createRole('team:a', { description: 'a', scopes: ['queue:route:b.x'] }), 403, 'InsufficientScopes');
  assert.equal((await authWith(t.root).role('team:a').catch((e: { statusCode: number }) => e.statusCode)), 404, 'nothing was written');
  await auth.createRole('team:a', { description: 'a', scopes: ['queue:route:a.x'] });
  assert.equal((await auth.createRole('team:a', { description: 'a', scopes: ['queue:route:a.x'] })).roleId, 'team:a', 'the same request again succeeds');
  await refusedWith(auth.createRole('team:a', { description: 'other', scopes: ['queue:route:a.x'] }), 409, 'RequestConflict');

  // root gives the role a scope the admin lacks; the admin may keep it while adding what it holds
  await authWith(t.root).updateRole('team:a', { description: 'a', scopes: ['queue:route:a.x', 'secret:thing'] });
  await auth.updateRole('team:a', { description: 'a2', scopes: ['queue:route:a.x', 'queue:route:a.y', 'secret:thing'] });
  await refusedWith(auth.updateRole('team:a', { description: 'a3', scopes: ['secret:other'] }), 403, 'InsufficientScopes');
  assert.equal((await auth.role('team:a')).description, 'a2');

  const rootAuth = authWith(t.root);
  const cycle = await refusedWith(rootAuth.createRole('team:b', { description: 'b', scopes: ['assume:team:b'] }), 400, 'InputError');
  assert.match(cycle, /cycle/);
  await rootAuth.createRole('team:c', { description: 'c', scopes: ['assume:team:d'] });
  await rootAuth.createRole('team:d', { description: 'd', scopes: ['D'] });
  await refusedWith(rootAuth.updateRole('team:d', { description: 'd', scopes: ['assume:team:c'] }), 400, 'InputError');
  await refusedWith(rootAuth.createRole('team:e', { description: 'e', scopes: ['a**'] }), 400, 'InputError');
  await refusedWith(rootAuth.createRole('team:p*', { description: 'p', scopes: ['x:*<..>'] }), 400, 'InputError');
  await refusedWith(rootAuth.updateRole('team:nope', { description: 'x', scopes: [] }), 404, 'ResourceNotFound');
  assert.deepEqual((await rootAuth.role('team:c')).expandedScopes, ['D', 'assume:team:c', 'assume:team:d']);
});

test('listRoles, listRoles2, listRoleIds page; expandScopes follows parameterized roles; currentScopes is the expanded set', async () => {
  const auth = authWith(t.root);
  await auth.createRole('repo:github.com/*', { description: 'repos', scopes: ['queue:route:index.<..>.*', 'assume:proj:ci'] });
  await auth.createRole('proj:ci', { description: 'ci', scopes: ['queue:create-task:lowest:tgs-test/ci'] });
  const expanded = await auth.expandScopes({ scopes: ['assume:repo:github.com/org/app'] });
  assert.deepEqual(expanded.scopes, [
    'assume:proj:ci',
    'assume:repo:github.com/org/app',
    'queue:create-task:lowest:tgs-test/ci',
    'queue:route:index.org/app.*',
  ]);
  const all = await auth.listRoles();
  const ids = all.map((r: { roleId: string }) => r.roleId);
  assert.ok(ids.includes('anonymous') && ids.includes('proj:ci') && ids.includes('repo:github.com/*'));
  const seen: string[] = [];
  let token: string | undefined;
  do {
    const page = await auth.listRoleIds({ limit: 2, ...(token ? { continuationToken: token } : {}) });
    assert.ok(page.roleIds.length <= 2);
    seen.push(...page.roleIds);
    token = page.continuationToken;
  } while (token);
  assert.deepEqual(seen, ids);
  const page1 = await auth.listRoles2({ limit: 1 });
  assert.equal(page1.roles.length, 1);
  assert.equal(page1.roles[0].roleId, ids[0]);

  const dev = await makeClient('project/dev', ['assume:repo:github.com/org/app', 'auth:current-scopes']);
  const current = await authWith(dev).currentScopes();
  for (const s of ['queue:route:index.org/app.*', 'queue:create-task:lowest:tgs-test/ci', 'assume:anonymous', 'queue:status:*']) {
    assert.ok(current.scopes.includes(s), s);
  }
  const client = await auth.client('project/dev');
  assert.ok(client.expandedScopes.includes('queue:route:index.org/app.*'));
});

test('requests without credentials hold the anonymous role; deleting it makes Taskcluster\'s read scopes required', async () => {
  const queue = queueWith(t.root);
  const taskId = slugid.nice();
  await queue.createTask(taskId, ciTask('anon'));
  const anonymous = new taskcluster.Queue({ rootUrl: t.rootUrl, retries: 0 });
  assert.equal((await anonymous.status(taskId)).status.taskId, taskId);
  const anon = await authWith(t.root).role('anonymous');
  await authWith(t.root).deleteRole('anonymous');
  try {
    await refusedWith(anonymous.status(taskId), 403, 'InsufficientScopes');
    const reader = await makeClient('project/reader', [`queue:status:${taskId}`]);
    assert.equal((await queueWith(reader).status(taskId)).status.taskId, taskId);
    await refusedWith(queueWith(reader).task(taskId), 403, 'InsufficientScopes');
  } finally {
    await authWith(t.root).createRole('anonymous', { description: anon.description, scopes: anon.scopes });
  }
  assert.equal((await anonymous.task(taskId)).metadata.name, 'role-test');
});
