import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApi, hawkHeader, type TestApi } from '../helpers/api.js';
import { createTemporaryCredentials } from '../../src/auth/temporaryCredentials.js';
import { ROOT_CLIENT_ID } from '../../src/config.js';

let t: TestApi;
before(async () => {
  t = await startTestApi();
});
after(async () => {
  await t.close();
});

test('ping answers without credentials', async () => {
  const res = await t.request('GET', '/api/queue/v1/ping', undefined, null);
  assert.equal(res.status, 200);
  assert.equal(res.body.alive, true);
});

test('an unknown endpoint is a 404 in Taskcluster shape', async () => {
  const res = await t.request('GET', '/api/queue/v1/no-such-thing', undefined, null);
  assert.equal(res.status, 404);
  assert.equal(res.body.code, 'ResourceNotFound');
  assert.match(res.body.message, /no-such-thing/);
});

test('a request signed with a wrong access token is refused with 401', async () => {
  const res = await t.request('GET', '/api/queue/v1/ping', undefined, { clientId: ROOT_CLIENT_ID, accessToken: 'wrong' });
  assert.equal(res.status, 401);
  assert.equal(res.body.code, 'AuthenticationFailed');
});

test('an unknown client is refused with 401', async () => {
  const res = await t.request('GET', '/api/queue/v1/ping', undefined, { clientId: 'nobody', accessToken: 'x' });
  assert.equal(res.status, 401);
  assert.match(res.body.message, /nobody/);
});

test('a replayed Hawk header is refused', async () => {
  const url = `${t.rootUrl}/api/queue/v1/ping`;
  const authorization = hawkHeader(url, 'GET', t.root);
  const first = await fetch(url, { headers: { authorization } });
  assert.equal(first.status, 200);
  const second = await fetch(url, { headers: { authorization } });
  assert.equal(second.status, 401);
  assert.match(((await second.json()) as { message: string }).message, /nonce/i);
});

test('temporary credentials signed by the root client authenticate', async () => {
  const temp = createTemporaryCredentials({
    issuerClientId: ROOT_CLIENT_ID,
    issuerAccessToken: t.root.accessToken,
    scopes: ['queue:ping'],
    start: new Date(Date.now() - 60_000),
    expiry: new Date(Date.now() + 60_000),
  });
  const ok = await t.request('GET', '/api/queue/v1/ping', undefined, temp);
  assert.equal(ok.status, 200);
  const forged = { ...temp, certificate: temp.certificate.replace('queue:ping', 'queue:*') };
  const bad = await t.request('GET', '/api/queue/v1/ping', undefined, forged);
  assert.equal(bad.status, 401);
  assert.match(bad.body.message, /signature/);
});

test('openapi document lists the declared endpoints', async () => {
  const res = await t.request('GET', '/api/queue/v1/openapi.json', undefined, null);
  assert.equal(res.status, 200);
  assert.equal(res.body.paths['/ping'].get.operationId, 'ping');
});
