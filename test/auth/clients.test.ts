import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApi, type Credentials, type TestApi } from '../../support/api.js';
import { ISSUER_CLIENT_ID, deleteExpiredClients } from '../../src/auth/clients.js';

let t: TestApi;
before(async () => {
  t = await startTestApi();
});
after(async () => {
  await t.close();
});

const auth = (method: string, path: string, body?: unknown, creds?: Credentials | null) => t.request(method, `/api/auth/v1${path}`, body, creds);
const inAYear = () => new Date(Date.now() + 365 * 24 * 3600 * 1000).toISOString();
const enc = encodeURIComponent;

async function create(clientId: string, scopes: string[], creds?: Credentials | null, extra: Record<string, unknown> = {}) {
  return auth('PUT', `/clients/${enc(clientId)}`, { description: `test client ${clientId}`, expires: inAYear(), scopes, ...extra }, creds);
}

test('ping answers without credentials', async () => {
  const res = await auth('GET', '/ping', undefined, null);
  assert.equal(res.status, 200);
  assert.equal(res.body.alive, true);
});

test('createClient returns the access token once; client() never does; the new credentials work', async () => {
  const res = await create('project/alice', ['queue:create-task:*', 'auth:current-scopes']);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.clientId, 'project/alice');
  assert.equal(typeof res.body.accessToken, 'string');
  assert.ok(res.body.accessToken.length >= 22);
  assert.deepEqual(res.body.scopes, ['queue:create-task:*', 'auth:current-scopes']);
  assert.equal(res.body.deleteOnExpiration, false);

  const got = await auth('GET', `/clients/${enc('project/alice')}`);
  assert.equal(got.status, 200);
  assert.equal(got.body.accessToken, undefined);
  assert.equal(got.body.description, 'test client project/alice');

  const alice = { clientId: 'project/alice', accessToken: res.body.accessToken as string };
  const scopes = await auth('GET', '/scopes/current', undefined, alice);
  assert.equal(scopes.status, 200);
  // expanded: every request also holds `assume:anonymous` and what that role grants
  for (const s of ['queue:create-task:*', 'auth:current-scopes', 'assume:anonymous']) assert.ok(scopes.body.scopes.includes(s), s);
  const alias = await auth('GET', '/current-scopes', undefined, alice);
  assert.deepEqual(alias.body.scopes, scopes.body.scopes);

  const again = await auth('PUT', `/clients/${enc('project/alice')}`, {
    description: 'test client project/alice',
    expires: res.body.expires,
    scopes: ['auth:current-scopes', 'queue:create-task:*'],
  });
  assert.equal(again.status, 200, 'the same settings again are accepted (a retried request)');
  assert.equal(again.body.accessToken, alice.accessToken);
  const different = await create('project/alice', ['queue:create-task:*']);
  assert.equal(different.status, 409);
  assert.equal(different.body.code, 'RequestConflict');
});

test('a caller must hold auth:create-client:<clientId> and every scope it grants', async () => {
  const creator = await create('project/creator', ['auth:create-client:project/creator/*', 'queue:route:a.*']);
  const creds = { clientId: 'project/creator', accessToken: creator.body.accessToken as string };
  const ok = await create('project/creator/child', ['queue:route:a.b'], creds);
  assert.equal(ok.status, 200, JSON.stringify(ok.body));
  const escalate = await create('project/creator/child2', ['queue:route:b'], creds);
  assert.equal(escalate.status, 403);
  assert.equal(escalate.body.code, 'InsufficientScopes');
  assert.match(escalate.body.message, /queue:route:b/);
  const elsewhere = await create('project/other', [], creds);
  assert.equal(elsewhere.status, 403);
  assert.match(elsewhere.body.message, /auth:create-client:project\/other/);
  const anonymous = await create('project/anon', [], null);
  assert.equal(anonymous.status, 403, 'no credentials: the anonymous role, refused as Taskcluster refuses it');
  assert.equal(anonymous.body.code, 'InsufficientScopes');
  const count = await t.db.pool.query("SELECT count(*)::int AS n FROM clients WHERE client_id IN ('project/creator/child2', 'project/other', 'project/anon')");
  assert.equal(count.rows[0].n, 0, 'refused requests create nothing');
});

test('static/ clients cannot be created, updated, reset or deleted through the API', async () => {
  const created = await create('static/mine', []);
  assert.equal(created.status, 400);
  assert.equal(created.body.code, 'InputError');
  for (const [method, path, body] of [
    ['POST', `/clients/${enc(ISSUER_CLIENT_ID)}`, { description: 'x', expires: inAYear() }],
    ['POST', `/clients/${enc(ISSUER_CLIENT_ID)}/reset`, undefined],
    ['DELETE', `/clients/${enc(ISSUER_CLIENT_ID)}`, undefined],
  ] as const) {
    const res = await auth(method, path, body);
    assert.equal(res.status, 400, `${method} ${path}`);
  }
  const issuer = await auth('GET', `/clients/${enc(ISSUER_CLIENT_ID)}`);
  assert.equal(issuer.status, 200, 'the issuer is still there');
});

test('bad input is a 400: unknown property, wrong type, bad clientId, scope ending in **', async () => {
  const cases: [string, string, unknown][] = [
    ['unknown property', 'project/bad1', { description: 'x', expires: inAYear(), colour: 'red' }],
    ['wrong type', 'project/bad2', { description: 'x', expires: inAYear(), scopes: 'queue:*' }],
    ['missing expires', 'project/bad3', { description: 'x' }],
    ['double star', 'project/bad4', { description: 'x', expires: inAYear(), scopes: ['a**'] }],
    ['bad clientId', 'bad%20id', { description: 'x', expires: inAYear() }],
  ];
  for (const [what, id, body] of cases) {
    const res = await auth('PUT', `/clients/${id.includes('%') ? id : enc(id)}`, body);
    assert.equal(res.status, 400, what);
    assert.match(res.body.code, /^Input(Validation)?Error$/, what);
  }
});

test('updateClient changes settings, needs the scopes it adds, keeps the token', async () => {
  const made = await create('project/upd', ['queue:a']);
  const token = made.body.accessToken as string;
  const updater = await create('project/updater', ['auth:update-client:project/upd', 'queue:b']);
  const creds = { clientId: 'project/updater', accessToken: updater.body.accessToken as string };
  const adds = await auth('POST', `/clients/${enc('project/upd')}`, { description: 'new', expires: inAYear(), scopes: ['queue:a', 'queue:b'] }, creds);
  assert.equal(adds.status, 200, JSON.stringify(adds.body));
  assert.deepEqual(adds.body.scopes, ['queue:a', 'queue:b']);
  assert.equal(adds.body.description, 'new');
  const tooMuch = await auth('POST', `/clients/${enc('project/upd')}`, { description: 'new', expires: inAYear(), scopes: ['queue:c'] }, creds);
  assert.equal(tooMuch.status, 403);
  assert.match(tooMuch.body.message, /queue:c/);
  const keep = await auth('POST', `/clients/${enc('project/upd')}`, { description: 'newer', expires: inAYear() });
  assert.deepEqual(keep.body.scopes, ['queue:a', 'queue:b'], 'no scopes in the request: scopes unchanged');
  const missing = await auth('POST', `/clients/${enc('project/nobody')}`, { description: 'x', expires: inAYear() });
  assert.equal(missing.status, 404);
  const still = await auth('GET', '/scopes/current', undefined, { clientId: 'project/upd', accessToken: token });
  assert.equal(still.status, 403, 'authenticated with the same token (403: it lacks auth:current-scopes, not 401)');
});

test('a reset token and a deleted client stop working at once', async () => {
  const made = await create('project/rotate', ['auth:current-scopes']);
  const old = { clientId: 'project/rotate', accessToken: made.body.accessToken as string };
  assert.equal((await auth('GET', '/scopes/current', undefined, old)).status, 200);
  const reset = await auth('POST', `/clients/${enc('project/rotate')}/reset`);
  assert.equal(reset.status, 200);
  assert.notEqual(reset.body.accessToken, old.accessToken);
  assert.ok(new Date(reset.body.lastRotated) >= new Date(made.body.lastRotated));
  const stale = await auth('GET', '/scopes/current', undefined, old);
  assert.equal(stale.status, 401);
  assert.equal(stale.body.code, 'AuthenticationFailed');
  const fresh = { clientId: 'project/rotate', accessToken: reset.body.accessToken as string };
  assert.equal((await auth('GET', '/scopes/current', undefined, fresh)).status, 200);

  const deleted = await auth('DELETE', `/clients/${enc('project/rotate')}`);
  assert.equal(deleted.status, 200);
  assert.equal((await auth('GET', '/scopes/current', undefined, fresh)).status, 401);
  assert.equal((await auth('GET', `/clients/${enc('project/rotate')}`)).status, 404);
  assert.equal((await auth('DELETE', `/clients/${enc('project/rotate')}`)).status, 200, 'deleting again is fine (Taskcluster)');
  assert.equal((await auth('POST', `/clients/${enc('project/rotate')}/reset`)).status, 404);
});

test('deleting or resetting needs its scope', async () => {
  await create('project/keep', []);
  const weak = await create('project/weak', ['auth:delete-client:project/other*']);
  const creds = { clientId: 'project/weak', accessToken: weak.body.accessToken as string };
  const del = await auth('DELETE', `/clients/${enc('project/keep')}`, undefined, creds);
  assert.equal(del.status, 403);
  assert.match(del.body.message, /auth:delete-client:project\/keep/);
  assert.equal((await auth('POST', `/clients/${enc('project/keep')}/reset`, undefined, creds)).status, 403);
  assert.equal((await auth('GET', `/clients/${enc('project/keep')}`)).status, 200);
});

test('listClients pages in clientId order, filters by prefix, and needs auth:list-clients', async () => {
  for (let i = 0; i < 5; i++) await create(`list/c${i}`, []);
  const pages: string[][] = [];
  let token: string | undefined;
  do {
    const res = await auth('GET', `/clients/?prefix=list/&limit=2${token ? `&continuationToken=${token}` : ''}`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    pages.push(res.body.clients.map((c: { clientId: string }) => c.clientId));
    for (const c of res.body.clients) assert.equal(c.accessToken, undefined);
    token = res.body.continuationToken;
  } while (token);
  assert.deepEqual(pages, [['list/c0', 'list/c1'], ['list/c2', 'list/c3'], ['list/c4']]);
  const all = await auth('GET', '/clients/');
  assert.ok(all.body.clients.some((c: { clientId: string }) => c.clientId === ISSUER_CLIENT_ID));
  assert.equal((await auth('GET', '/clients/', undefined, null)).status, 403);
  assert.equal((await auth('GET', '/clients/?colour=red')).status, 400);
});

test('expired clients made with deleteOnExpiration are removed; others stay (and cannot authenticate)', async () => {
  const past = new Date(Date.now() - 1000).toISOString();
  const gone = await create('expire/gone', ['auth:current-scopes'], undefined, { expires: past, deleteOnExpiration: true });
  assert.equal(gone.status, 200);
  const kept = await create('expire/kept', ['auth:current-scopes'], undefined, { expires: past });
  const expired = await auth('GET', '/scopes/current', undefined, { clientId: 'expire/kept', accessToken: kept.body.accessToken as string });
  assert.equal(expired.status, 401);
  assert.match(expired.body.message, /expired/);
  // The API's own sweep (every 200 ms here) runs the same deletion and may have been first.
  await deleteExpiredClients(t.db.pool);
  assert.equal((await auth('GET', `/clients/${enc('expire/gone')}`)).status, 404);
  assert.equal((await auth('GET', `/clients/${enc('expire/kept')}`)).status, 200);
});

test('the official taskcluster-client Auth class manages clients against tgs', async () => {
  // imported by name: the package ships no types (tsc would refuse a literal import)
  const packageName = 'taskcluster-client';
  const { default: taskcluster } = (await import(packageName)) as { default: any };
  const tcAuth = new taskcluster.Auth({ rootUrl: t.rootUrl, credentials: t.root, retries: 0 });
  const made = await tcAuth.createClient('tc/client', { description: 'via taskcluster-client', expires: taskcluster.fromNow('1 day'), scopes: ['auth:current-scopes'] });
  assert.equal(made.clientId, 'tc/client');
  const mine = new taskcluster.Auth({ rootUrl: t.rootUrl, credentials: { clientId: 'tc/client', accessToken: made.accessToken }, retries: 0 });
  // expanded, with what every request holds through `assume:anonymous`
  assert.ok((await mine.currentScopes()).scopes.includes('auth:current-scopes'));
  assert.equal((await tcAuth.client('tc/client')).description, 'via taskcluster-client');
  const listed = await tcAuth.listClients({ prefix: 'tc/' });
  assert.deepEqual(listed.clients.map((c: { clientId: string }) => c.clientId), ['tc/client']);
  const reset = await tcAuth.resetAccessToken('tc/client');
  assert.notEqual(reset.accessToken, made.accessToken);
  await tcAuth.deleteClient('tc/client');
  await assert.rejects(() => tcAuth.client('tc/client'), (err: { statusCode?: number }) => err.statusCode === 404);
});

test('the auth service publishes its OpenAPI document', async () => {
  const res = await fetch(`${t.rootUrl}/api/auth/v1/openapi.json`);
  assert.equal(res.status, 200);
  const doc = (await res.json()) as { paths: Record<string, Record<string, { operationId: string }>> };
  const operations = Object.values(doc.paths).flatMap((p) => Object.values(p).map((o) => o.operationId));
  for (const name of ['ping', 'listClients', 'client', 'createClient', 'updateClient', 'resetAccessToken', 'deleteClient', 'currentScopes']) {
    assert.ok(operations.includes(name), `${name} in ${operations.join(', ')}`);
  }
});
