import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApi, type Credentials, type TestApi } from '../../support/api.js';
import { ROOT_CLIENT_ID } from '../../src/config.js';
import { deleteExpiredClients } from '../../src/auth/clients.js';
import { purgeAuditHistory } from '../../src/auth/audit.js';

/*
 * The audit history (migration 031): every client and role change the auth API makes writes a row in the change's
 * transaction, with Taskcluster's action names and the caller's clientId; getEntityHistory and listAuditHistory list
 * them, paged. A change that fails or changes nothing writes none.
 */

let t: TestApi;
before(async () => {
  t = await startTestApi({ temporalAddress: '127.0.0.1:1' });
});
after(async () => {
  await t?.close();
});

const inHours = (n: number) => new Date(Date.now() + n * 3600_000).toISOString();
const path = (id: string) => encodeURIComponent(id);

async function ok(res: Promise<{ status: number; body: any }>, what: string) {
  const r = await res;
  assert.ok(r.status < 400, `${what}: ${r.status} ${JSON.stringify(r.body)}`);
  return r.body;
}

/** Every row of an entity's history, read page by page (`limit` a page). */
async function history(entityType: string, entityId: string, limit = 1000, credentials?: Credentials) {
  const rows: Array<{ clientId: string; actionType: string; entityId: string; entityType: string; created: string }> = [];
  let token: string | undefined;
  do {
    const query = `?limit=${limit}${token ? `&continuationToken=${token}` : ''}`;
    const body = await ok(t.request('GET', `/api/auth/v1/audit/${entityType}/${path(entityId)}${query}`, undefined, credentials), 'getEntityHistory');
    rows.push(...body.auditHistory);
    token = body.continuationToken;
  } while (token);
  return rows;
}

async function makeClient(clientId: string, scopes: string[]): Promise<Credentials> {
  const body = await ok(t.request('PUT', `/api/auth/v1/clients/${path(clientId)}`, { description: clientId, expires: inHours(1), scopes }), 'create client');
  return { clientId, accessToken: body.accessToken };
}

test('each client change writes its row: created, updated, access token reset, disabled, enabled, deleted, by the caller', async () => {
  const id = 'audit/client-a';
  const settings = { description: 'a', expires: inHours(1), scopes: ['queue:ping'] };
  await ok(t.request('PUT', `/api/auth/v1/clients/${path(id)}`, settings), 'create');
  // the same request again (a retry) answers the client and records nothing
  await ok(t.request('PUT', `/api/auth/v1/clients/${path(id)}`, settings), 'create again');
  await ok(t.request('POST', `/api/auth/v1/clients/${path(id)}`, { ...settings, description: 'a, updated' }), 'update');
  await ok(t.request('POST', `/api/auth/v1/clients/${path(id)}/reset`), 'reset');
  await ok(t.request('POST', `/api/auth/v1/clients/${path(id)}/disable`), 'disable');
  await ok(t.request('POST', `/api/auth/v1/clients/${path(id)}/enable`), 'enable');
  await ok(t.request('DELETE', `/api/auth/v1/clients/${path(id)}`), 'delete');
  const rows = await history('client', id);
  assert.deepEqual(
    rows.map((r) => r.actionType),
    ['created', 'updated', 'access token reset', 'client disabled', 'client enabled', 'deleted'],
  );
  for (const r of rows) {
    assert.equal(r.clientId, ROOT_CLIENT_ID);
    assert.equal(r.entityId, id);
    assert.equal(r.entityType, 'client');
    assert.ok(Math.abs(Date.parse(r.created) - Date.now()) < 60_000, r.created);
  }
  // paged: two rows a page give the same rows in the same order
  assert.deepEqual(await history('client', id, 2), rows);
});

test('failed or empty client changes write nothing', async () => {
  const id = 'audit/client-b';
  await ok(t.request('PUT', `/api/auth/v1/clients/${path(id)}`, { description: 'b', expires: inHours(1), scopes: [] }), 'create');
  const before = await history('client', id);
  assert.equal(before.length, 1);
  // other settings for an existing clientId: 409
  assert.equal((await t.request('PUT', `/api/auth/v1/clients/${path(id)}`, { description: 'other', expires: inHours(1), scopes: [] })).status, 409);
  // a caller without the scopes: 403
  const weak = await makeClient('audit/weak', []);
  assert.equal((await t.request('POST', `/api/auth/v1/clients/${path(id)}`, { description: 'x', expires: inHours(1) }, weak)).status, 403);
  assert.equal((await t.request('DELETE', `/api/auth/v1/clients/${path(id)}`, undefined, weak)).status, 403);
  // scopes ending in ** are refused before anything is written
  assert.equal((await t.request('POST', `/api/auth/v1/clients/${path(id)}`, { description: 'x', expires: inHours(1), scopes: ['a:**'] })).status, 400);
  assert.deepEqual(await history('client', id), before);
  // a client that does not exist: 404 for the changes, success for the delete, and no row either way
  const ghost = 'audit/ghost';
  assert.equal((await t.request('POST', `/api/auth/v1/clients/${path(ghost)}`, { description: 'x', expires: inHours(1) })).status, 404);
  assert.equal((await t.request('POST', `/api/auth/v1/clients/${path(ghost)}/reset`)).status, 404);
  assert.equal((await t.request('POST', `/api/auth/v1/clients/${path(ghost)}/disable`)).status, 404);
  assert.equal((await t.request('DELETE', `/api/auth/v1/clients/${path(ghost)}`)).status, 200);
  assert.deepEqual(await history('client', ghost), []);
  // static clients cannot be changed, so have no history
  assert.equal((await t.request('POST', `/api/auth/v1/clients/${path('static/x')}/disable`)).status, 400);
  assert.deepEqual(await history('client', 'static/x'), []);
});

test('the audit row is written by the change\'s transaction: when it cannot be written, the change is not made', async () => {
  const id = 'audit/unrecordable';
  await t.db.pool.query(`ALTER TABLE audit_history ADD CONSTRAINT test_unrecordable CHECK (entity_id <> '${id}')`);
  try {
    const res = await t.request('PUT', `/api/auth/v1/clients/${path(id)}`, { description: 'x', expires: inHours(1), scopes: [] });
    assert.equal(res.status, 500);
    assert.equal((await t.request('GET', `/api/auth/v1/clients/${path(id)}`)).status, 404, 'the client was not created');
    const roleRes = await t.request('PUT', `/api/auth/v1/roles/${path(id)}`, { description: 'x', scopes: [] });
    assert.equal(roleRes.status, 500);
    assert.equal((await t.request('GET', `/api/auth/v1/roles/${path(id)}`)).status, 404, 'the role was not created');
  } finally {
    await t.db.pool.query('ALTER TABLE audit_history DROP CONSTRAINT test_unrecordable');
  }
});

test('each role change writes its row; a repeat, a refused cycle, a missing role write none', async () => {
  const id = 'audit-role:a';
  const role = { description: 'a', scopes: ['queue:ping'] };
  await ok(t.request('PUT', `/api/auth/v1/roles/${path(id)}`, role), 'create');
  await ok(t.request('PUT', `/api/auth/v1/roles/${path(id)}`, role), 'create again');
  await ok(t.request('POST', `/api/auth/v1/roles/${path(id)}`, { description: 'a2', scopes: ['queue:ping', 'assume:audit-role:b'] }), 'update');
  // a cycle (b assumes a, which assumes b): refused, nothing recorded for b
  assert.equal((await t.request('PUT', `/api/auth/v1/roles/${path('audit-role:b')}`, { description: 'b', scopes: ['assume:audit-role:a'] })).status, 400);
  assert.equal((await t.request('POST', `/api/auth/v1/roles/${path('audit-role:missing')}`, role)).status, 404);
  await ok(t.request('DELETE', `/api/auth/v1/roles/${path('audit-role:missing')}`), 'delete a missing role');
  await ok(t.request('DELETE', `/api/auth/v1/roles/${path(id)}`), 'delete');
  assert.deepEqual((await history('role', id)).map((r) => [r.actionType, r.clientId, r.entityType]), [
    ['created', ROOT_CLIENT_ID, 'role'],
    ['updated', ROOT_CLIENT_ID, 'role'],
    ['deleted', ROOT_CLIENT_ID, 'role'],
  ]);
  assert.deepEqual(await history('role', 'audit-role:b'), []);
  assert.deepEqual(await history('role', 'audit-role:missing'), []);
});

test('listAuditHistory lists the changes a client made, paged; both reads need their scopes', async () => {
  const admin = await makeClient('audit/admin', [
    'auth:create-client:audit/made-by-admin/*',
    'auth:update-client:audit/made-by-admin/*',
    'auth:create-role:audit-admin:*',
  ]);
  await ok(t.request('PUT', `/api/auth/v1/clients/${path('audit/made-by-admin/1')}`, { description: '1', expires: inHours(1), scopes: [] }, admin), 'create 1');
  await ok(t.request('PUT', `/api/auth/v1/clients/${path('audit/made-by-admin/2')}`, { description: '2', expires: inHours(1), scopes: [] }, admin), 'create 2');
  await ok(t.request('POST', `/api/auth/v1/clients/${path('audit/made-by-admin/1')}`, { description: '1b', expires: inHours(1) }, admin), 'update 1');
  await ok(t.request('PUT', `/api/auth/v1/roles/${path('audit-admin:r')}`, { description: 'r', scopes: [] }, admin), 'create role');
  const pages: any[] = [];
  let token: string | undefined;
  do {
    const body = await ok(t.request('GET', `/api/auth/v1/clients/${path(admin.clientId)}/audit?limit=3${token ? `&continuationToken=${token}` : ''}`), 'listAuditHistory');
    pages.push(body);
    token = body.continuationToken;
  } while (token);
  assert.equal(pages.length, 2);
  assert.deepEqual(
    pages.flatMap((p) => p.auditHistory).map((r: any) => [r.entityType, r.entityId, r.actionType, r.clientId]),
    [
      ['client', 'audit/made-by-admin/1', 'created', admin.clientId],
      ['client', 'audit/made-by-admin/2', 'created', admin.clientId],
      ['client', 'audit/made-by-admin/1', 'updated', admin.clientId],
      ['role', 'audit-admin:r', 'created', admin.clientId],
    ],
  );
  // root's own list does not hold them
  const rootList = await ok(t.request('GET', `/api/auth/v1/clients/${path(ROOT_CLIENT_ID)}/audit`), 'root list');
  assert.ok(rootList.auditHistory.every((r: any) => r.clientId === ROOT_CLIENT_ID));

  // the scopes: auth:audit-history:<entityType>, auth:client-audit-history:<clientId>
  const reader = await makeClient('audit/reader', ['auth:audit-history:role', `auth:client-audit-history:${admin.clientId}`]);
  assert.equal((await t.request('GET', `/api/auth/v1/audit/role/${path('audit-admin:r')}`, undefined, reader)).status, 200);
  const refused = await t.request('GET', `/api/auth/v1/audit/client/${path('audit/made-by-admin/1')}`, undefined, reader);
  assert.equal(refused.status, 403);
  assert.equal(refused.body.code, 'InsufficientScopes');
  assert.equal((await t.request('GET', `/api/auth/v1/clients/${path(admin.clientId)}/audit`, undefined, reader)).status, 200);
  assert.equal((await t.request('GET', `/api/auth/v1/clients/${path(ROOT_CLIENT_ID)}/audit`, undefined, reader)).status, 403);
  assert.equal((await t.request('GET', `/api/auth/v1/audit/client/x`, undefined, null)).status, 403);
  // Taskcluster's entity types only; a token tgs did not make
  assert.equal((await t.request('GET', '/api/auth/v1/audit/task/x')).status, 400);
  assert.deepEqual(await history('hook', 'some/hook'), []);
  assert.equal((await t.request('GET', `/api/auth/v1/audit/client/x?continuationToken=${Buffer.from('abc').toString('base64url')}`)).status, 400);
});

test('the expiry sweep records the clients it deletes as expired; rows past 30 days are purged', async () => {
  const id = 'audit/expiring';
  await ok(t.request('PUT', `/api/auth/v1/clients/${path(id)}`, { description: 'e', expires: inHours(1), scopes: [], deleteOnExpiration: true }), 'create');
  await t.db.pool.query(`UPDATE clients SET expires = now() - interval '1 minute' WHERE client_id = $1`, [id]);
  await deleteExpiredClients(t.db.pool);
  assert.deepEqual((await history('client', id)).map((r) => [r.actionType, r.clientId]), [
    ['created', ROOT_CLIENT_ID],
    ['expired', 'static/tgs/auth'],
  ]);
  await t.db.pool.query(`UPDATE audit_history SET created = now() - interval '31 days' WHERE entity_id = $1 AND action_type = 'created'`, [id]);
  await purgeAuditHistory(t.db.pool);
  assert.deepEqual((await history('client', id)).map((r) => r.actionType), ['expired']);
});
