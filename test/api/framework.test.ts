import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import hawk from 'hawk';
import slugid from 'slugid';
import { startTestApi, hawkHeader, type TestApi } from '../../support/api.js';
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

test('a request whose clock is more than 15 minutes off is refused; within the window it is accepted', async () => {
  const url = `${t.rootUrl}/api/queue/v1/task/${slugid.nice()}/status`;
  const signed = (offsetMs: number) =>
    hawk.client.header(url, 'GET', {
      credentials: { id: t.root.clientId, key: t.root.accessToken, algorithm: 'sha256' },
      localtimeOffsetMsec: offsetMs,
    }).header;
  for (const offset of [-16 * 60_000, 16 * 60_000]) {
    const res = await fetch(url, { headers: { authorization: signed(offset) } });
    assert.equal(res.status, 401, `offset ${offset} ms`);
    assert.match(((await res.json()) as { message: string }).message, /stale|timestamp/i);
  }
  // 14 minutes off is within Taskcluster's 15-minute skew: authenticated (the task just does not exist)
  const ok = await fetch(url, { headers: { authorization: signed(-14 * 60_000) } });
  assert.notEqual(ok.status, 401);
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
