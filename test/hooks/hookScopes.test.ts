import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { startTestApi, type Credentials, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';

/*
 * A hook's task is created with the scopes of the role `hook-id:<hookGroupId>/<hookId>` and no more: not the
 * scopes of whoever triggers it (Taskcluster: the hooks service calls createTask with that role as its
 * authorizedScopes). A template asking for more is refused at fire time, and the refusal is a recorded fire.
 */

let t: TestApi;
let triggerOnly: Credentials;
before(async () => {
  // no Temporal: hooks without a schedule never reach it
  t = await startTestApi({ temporalAddress: '127.0.0.1:1' });
  const clientId = `hooks/trigger-only-${randomBytes(3).toString('hex')}`;
  const res = await t.request('PUT', `/api/auth/v1/clients/${encodeURIComponent(clientId)}`, {
    description: 'may trigger hooks, holds nothing else',
    expires: new Date(Date.now() + 3600_000).toISOString(),
    scopes: ['hooks:trigger-hook:scopes/*'],
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  triggerOnly = { clientId, accessToken: res.body.accessToken };
  ok(await t.request('PUT', `/api/auth/v1/roles/${encodeURIComponent('hook-id:scopes/*')}`, {
    description: 'what the hooks of the group `scopes` may create',
    scopes: ['queue:create-task:lowest:tgs-test/fast', 'queue:scheduler-id:-', 'secrets:get:granted'],
  }));
});
after(async () => {
  await t?.close();
});

function ok(res: { status: number; body: any }) {
  assert.ok(res.status < 400, `${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

const hook = (scopes: string[]) => ({
  metadata: { name: 'scopes', description: 'asks for scopes', owner: 'hooks@example.com' },
  task: { ...fastTask('hook task'), scopes },
});

test('a caller without createTask\'s scopes fires a hook whose role holds them: the task gets the role\'s scopes', async () => {
  ok(await t.request('PUT', '/api/hooks/v1/hooks/scopes/granted', hook(['secrets:get:granted'])));
  const fired = ok(await t.request('POST', '/api/hooks/v1/hooks/scopes/granted/trigger', {}, triggerOnly));
  const task = ok(await t.request('GET', `/api/queue/v1/task/${fired.taskId}`));
  assert.deepEqual(task.scopes, ['secrets:get:granted']);
  const { lastFires } = ok(await t.request('GET', '/api/hooks/v1/hooks/scopes/granted/last-fires'));
  assert.deepEqual(lastFires.map((f: { result: string; taskId: string }) => [f.result, f.taskId]), [['success', fired.taskId]]);
});

test('a template asking for more than the role is refused at fire time, even for root, and the refusal is recorded', async () => {
  ok(await t.request('PUT', '/api/hooks/v1/hooks/scopes/greedy', hook(['secrets:get:granted', 'secrets:get:everything'])));
  for (const [who, credentials] of [['root', t.root], ['a client that may only trigger', triggerOnly]] as const) {
    const res = await t.request('POST', '/api/hooks/v1/hooks/scopes/greedy/trigger', {}, credentials);
    assert.equal(res.status, 403, `${who}: ${JSON.stringify(res.body)}`);
    assert.equal(res.body.code, 'InsufficientScopes');
    assert.match(res.body.message, /^The role `hook-id:scopes\/greedy` does not have sufficient scopes to create the task/);
    assert.match(res.body.message, /secrets:get:everything/);
  }
  const { lastFires } = ok(await t.request('GET', '/api/hooks/v1/hooks/scopes/greedy/last-fires'));
  assert.equal(lastFires.length, 2);
  for (const fire of lastFires) {
    assert.equal(fire.result, 'error');
    assert.equal(fire.taskState, 'unknown', 'no task was created');
    assert.match(fire.error, /secrets:get:everything/);
    const task = await t.request('GET', `/api/queue/v1/task/${fire.taskId}`);
    assert.equal(task.status, 404);
  }
  const status = ok(await t.request('GET', '/api/hooks/v1/hooks/scopes/greedy/status'));
  assert.equal(status.lastFire.result, 'error');
  assert.equal(status.lastFire.error.code, 'InsufficientScopes');
});

test('the role\'s scopes are read at fire time: a scope taken from the role refuses the next fire', async () => {
  const roleId = encodeURIComponent('hook-id:narrowed/hook');
  const scopes = ['queue:create-task:lowest:tgs-test/fast', 'queue:scheduler-id:-', 'secrets:get:narrowed'];
  ok(await t.request('PUT', `/api/auth/v1/roles/${roleId}`, { description: 'narrowed later', scopes }));
  ok(await t.request('PUT', '/api/hooks/v1/hooks/narrowed/hook', hook(['secrets:get:narrowed'])));
  ok(await t.request('POST', '/api/hooks/v1/hooks/narrowed/hook/trigger', {}));
  ok(await t.request('POST', `/api/auth/v1/roles/${roleId}`, { description: 'narrowed', scopes: scopes.slice(0, 2) }));
  const res = await t.request('POST', '/api/hooks/v1/hooks/narrowed/hook/trigger', {});
  assert.equal(res.status, 403, JSON.stringify(res.body));
});

test('creating or changing a hook needs assume: its role, so a hook cannot be made to act with scopes its author lacks', async () => {
  const clientId = `hooks/modify-only-${randomBytes(3).toString('hex')}`;
  const created = ok(await t.request('PUT', `/api/auth/v1/clients/${encodeURIComponent(clientId)}`, {
    description: 'may modify hooks but not assume their role',
    expires: new Date(Date.now() + 3600_000).toISOString(),
    scopes: ['hooks:modify-hook:scopes/*'],
  }));
  const modifyOnly = { clientId, accessToken: created.accessToken };
  const res = await t.request('PUT', '/api/hooks/v1/hooks/scopes/sneaky', hook([]), modifyOnly);
  assert.equal(res.status, 403, JSON.stringify(res.body));
  assert.match(res.body.message, /assume:hook-id:scopes\/sneaky/);
  assert.equal((await t.request('GET', '/api/hooks/v1/hooks/scopes/sneaky')).status, 404, 'nothing written');
});
