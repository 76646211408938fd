import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import hawk from 'hawk';
import taskcluster from 'taskcluster-client';
import { startTestApi, hawkHeader, type Credentials, type TestApi } from '../../support/api.js';

/*
 * authenticateHawk: another service shows tgs a request it received (method, resource, host, port, Authorization)
 * and gets tgs's own decision on it. testAuthenticate / testAuthenticateGet: Taskcluster's test endpoints, which
 * authenticate against the fixed client tester/no-secret only.
 */

let t: TestApi;
let client: Credentials;
const inHours = (n: number) => new Date(Date.now() + n * 3600_000).toISOString();
const OTHER = 'https://other.example.com/api/other/v1/thing?x=1';
const hawkOf = (c: Credentials) => ({ id: c.clientId, key: c.accessToken, algorithm: 'sha256' as const });

before(async () => {
  t = await startTestApi({ temporalAddress: '127.0.0.1:1' });
  const role = await t.request('PUT', '/api/auth/v1/roles/project%3Aother', { description: 'other', scopes: ['other:read:*'] });
  assert.equal(role.status, 200, JSON.stringify(role.body));
  const created = await t.request('PUT', '/api/auth/v1/clients/other%2Fcaller', { description: 'c', expires: inHours(2), scopes: ['assume:project:other', 'other:write'] });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  client = { clientId: 'other/caller', accessToken: created.body.accessToken };
});
after(async () => {
  await t?.close();
});

/** Asks authenticateHawk about a request (no credentials of its own: the endpoint needs none). */
async function ask(request: Record<string, unknown>) {
  const res = await t.request('POST', '/api/auth/v1/authenticate-hawk', { method: 'get', resource: '/api/other/v1/thing?x=1', host: 'other.example.com', port: 443, ...request }, null);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return res.body;
}

test('authenticateHawk: a correctly signed request is auth-success with the client\'s scopes expanded through the roles', async () => {
  const answer = await ask({ authorization: hawkHeader(OTHER, 'GET', client) });
  const expanded = await t.request('POST', '/api/auth/v1/scopes/expand', { scopes: ['assume:project:other', 'other:write', 'assume:anonymous'] });
  assert.deepEqual(answer, {
    status: 'auth-success',
    scheme: 'hawk',
    clientId: 'other/caller',
    scopes: expanded.body.scopes,
    expires: answer.expires,
  });
  assert.ok(answer.scopes.includes('other:read:*') && answer.scopes.includes('assume:anonymous'), JSON.stringify(answer.scopes));
  const stored = await t.request('GET', '/api/auth/v1/clients/other%2Fcaller');
  assert.equal(answer.expires, stored.body.expires, 'valid until the client expires');
});

test('authenticateHawk: the payload hash of the header is answered; bewits, temporary credentials and authorizedScopes count', async () => {
  const { header } = hawk.client.header('https://other.example.com/api/other/v1/thing', 'POST', { credentials: hawkOf(client), payload: '{"a":1}', contentType: 'application/json' });
  const withHash = await ask({ method: 'post', resource: '/api/other/v1/thing', authorization: header });
  assert.equal(withHash.status, 'auth-success');
  assert.equal(withHash.hash, hawk.client.header('https://x', 'POST', { credentials: hawkOf(client), payload: '{"a":1}', contentType: 'application/json' }).artifacts.hash);

  const bewit = hawk.client.getBewit(OTHER, { credentials: hawkOf(client), ttlSec: 60 });
  const viaBewit = await ask({ resource: `/api/other/v1/thing?x=1&bewit=${bewit}` });
  assert.equal(viaBewit.status, 'auth-success', JSON.stringify(viaBewit));
  assert.equal(viaBewit.clientId, 'other/caller');

  const temp = taskcluster.createTemporaryCredentials({ credentials: client, start: new Date(Date.now() - 60_000), expiry: new Date(Date.now() + 600_000), scopes: ['other:read:a'] });
  const viaTemp = await ask({ authorization: hawkHeader(OTHER, 'GET', temp) });
  assert.equal(viaTemp.status, 'auth-success', JSON.stringify(viaTemp));
  assert.ok(viaTemp.scopes.includes('other:read:a') && !viaTemp.scopes.includes('other:write'), JSON.stringify(viaTemp.scopes));
  assert.ok(Date.parse(viaTemp.expires) <= Date.now() + 600_000 + 5 * 60_000 + 1000, 'temporary credentials hold until their expiry');

  const restricted = await ask({ authorization: hawkHeader(OTHER, 'GET', client, { authorizedScopes: ['other:write'] }) });
  assert.equal(restricted.status, 'auth-success');
  assert.ok(restricted.scopes.includes('other:write') && !restricted.scopes.includes('other:read:*'), JSON.stringify(restricted.scopes));
  const overstepping = await ask({ authorization: hawkHeader(OTHER, 'GET', client, { authorizedScopes: ['queue:*'] }) });
  assert.equal(overstepping.status, 'auth-failed');
});

test('authenticateHawk: a bad signature, an unknown, disabled or expired client, another host or port, a replay are auth-failed', async () => {
  const failed = async (request: Record<string, unknown>, why: RegExp) => {
    const answer = await ask(request);
    assert.deepEqual(Object.keys(answer).sort(), ['message', 'status']);
    assert.equal(answer.status, 'auth-failed');
    assert.match(answer.message, why);
  };
  await failed({ authorization: hawkHeader(OTHER, 'GET', { ...client, accessToken: 'wrong' }) }, /Bad mac/);
  await failed({ authorization: hawkHeader(OTHER, 'GET', { clientId: 'nobody', accessToken: 'x' }) }, /not a known client/);
  await failed({ authorization: hawkHeader(OTHER, 'GET', client), port: 8443 }, /Bad mac/);
  await failed({ authorization: hawkHeader(OTHER, 'GET', client), host: 'elsewhere.example.com' }, /Bad mac/);
  await failed({ authorization: hawkHeader(OTHER, 'GET', client), method: 'post' }, /Bad mac/);
  await failed({ authorization: 'Hawk nonsense' }, /./);
  const once = hawkHeader(OTHER, 'GET', client);
  assert.equal((await ask({ authorization: once })).status, 'auth-success');
  await failed({ authorization: once }, /nonce/);

  const created = await t.request('PUT', '/api/auth/v1/clients/other%2Fshort-lived', { description: 's', expires: inHours(1), scopes: [] });
  const shortLived = { clientId: 'other/short-lived', accessToken: created.body.accessToken };
  assert.equal((await t.request('POST', '/api/auth/v1/clients/other%2Fshort-lived/disable')).status, 200);
  await failed({ authorization: hawkHeader(OTHER, 'GET', shortLived) }, /disabled/);
  assert.equal((await t.request('POST', '/api/auth/v1/clients/other%2Fshort-lived/enable')).status, 200);
  assert.equal((await ask({ authorization: hawkHeader(OTHER, 'GET', shortLived) })).status, 'auth-success');
  await t.db.pool.query(`UPDATE clients SET expires = now() - interval '1 minute' WHERE client_id = 'other/short-lived'`);
  await failed({ authorization: hawkHeader(OTHER, 'GET', shortLived) }, /expired/);
});

test('authenticateHawk: no credentials is no-auth with the anonymous scopes; an invalid request is 400', async () => {
  const answer = await ask({});
  assert.equal(answer.status, 'no-auth');
  assert.equal(answer.scheme, 'none');
  assert.ok(answer.scopes.includes('assume:anonymous'));
  assert.ok(Date.parse(answer.expires) > Date.now());
  for (const bad of [{ method: 'GET' }, { port: 70000 }, { host: 'not a host' }, { resource: 7 }, { extra: 1 }]) {
    const res = await t.request('POST', '/api/auth/v1/authenticate-hawk', { method: 'get', resource: '/', host: 'h', port: 1, ...bad }, null);
    assert.equal(res.status, 400, `${JSON.stringify(bad)}: ${JSON.stringify(res.body)}`);
  }
});

/** A request to testAuthenticate signed with `credentials`, as the official client sends it. */
async function testAuthenticate(credentials: Credentials | null, body: unknown, options: { authorizedScopes?: string[]; payloadOf?: string } = {}) {
  const url = `${t.rootUrl}/api/auth/v1/test-authenticate`;
  const text = JSON.stringify(body);
  const headers: Record<string, string> = { 'content-type': 'application/json' };
  if (credentials) {
    const ext: Record<string, unknown> = {};
    if (credentials.certificate) ext.certificate = JSON.parse(credentials.certificate);
    if (options.authorizedScopes) ext.authorizedScopes = options.authorizedScopes;
    headers.authorization = hawk.client.header(url, 'POST', {
      credentials: hawkOf(credentials),
      payload: options.payloadOf ?? text,
      contentType: 'application/json',
      ...(Object.keys(ext).length ? { ext: Buffer.from(JSON.stringify(ext)).toString('base64') } : {}),
    }).header;
  }
  const res = await fetch(url, { method: 'POST', headers, body: text });
  return { status: res.status, body: (await res.json()) as any };
}

const tester = { clientId: 'tester', accessToken: 'no-secret' };

test('testAuthenticate: tester/no-secret holds clientScopes (and assume:anonymous); requiredScopes satisfied or 403', async () => {
  assert.deepEqual(await testAuthenticate(tester, { clientScopes: [], requiredScopes: [] }), { status: 200, body: { clientId: 'tester', scopes: ['assume:anonymous'] } });
  assert.deepEqual(await testAuthenticate(tester, { clientScopes: ['test-scope:*'], requiredScopes: ['test-scope:test'] }), {
    status: 200,
    body: { clientId: 'tester', scopes: ['assume:anonymous', 'test-scope:*'] },
  });
  const refused = await testAuthenticate(tester, { clientScopes: ['test-scope'], requiredScopes: ['test-scope:*'] });
  assert.equal(refused.status, 403);
  assert.equal(refused.body.code, 'InsufficientScopes');
  // authorizedScopes and named temporary credentials, with Taskcluster's answers (its client tests, creds_test.js)
  assert.deepEqual(await testAuthenticate(tester, { clientScopes: ['scopes:*'], requiredScopes: ['scopes:specific'] }, { authorizedScopes: ['scopes:specific'] }), {
    status: 200,
    body: { clientId: 'tester', scopes: ['assume:anonymous', 'scopes:specific'] },
  });
  const named = taskcluster.createTemporaryCredentials({ clientId: 'my-temp-cred', credentials: tester, start: new Date(Date.now() - 60_000), expiry: new Date(Date.now() + 600_000), scopes: ['scopes:*'] });
  assert.deepEqual(
    await testAuthenticate(named, { clientScopes: ['scopes:*', 'auth:create-client:my-temp-cred'], requiredScopes: ['scopes:specific'] }, { authorizedScopes: ['scopes:specific', 'scopes:another'] }),
    { status: 200, body: { clientId: 'my-temp-cred', scopes: ['assume:anonymous', 'scopes:specific', 'scopes:another'] } },
  );
  // the issuer lacks auth:create-client:my-temp-cred
  assert.equal((await testAuthenticate(named, { clientScopes: ['scopes:*'], requiredScopes: [] })).status, 401);
});

test('testAuthenticate: a wrong token, a real client of tgs, a body other than the one signed are 401; tester is nobody elsewhere', async () => {
  const wrong = await testAuthenticate({ ...tester, accessToken: 'wrong' }, { clientScopes: ['a'], requiredScopes: ['a'] });
  assert.equal(wrong.status, 401);
  assert.equal(wrong.body.code, 'AuthenticationFailed');
  assert.equal((await testAuthenticate(t.root, { clientScopes: [], requiredScopes: [] })).status, 401, 'the deployment\'s clients are not the test clients');
  assert.equal((await testAuthenticate(client, { clientScopes: [], requiredScopes: [] })).status, 401);
  const tampered = await testAuthenticate(tester, { clientScopes: ['*'], requiredScopes: ['*'] }, { payloadOf: JSON.stringify({ clientScopes: [], requiredScopes: [] }) });
  assert.equal(tampered.status, 401);
  assert.match(tampered.body.message, /payload hash/);
  const anonymous = await testAuthenticate(null, { clientScopes: [], requiredScopes: ['a'] });
  assert.equal(anonymous.status, 403, 'no credentials: the anonymous role, which lacks the required scope');
  // tester authenticates nothing but the test endpoints
  assert.equal((await t.request('GET', '/api/auth/v1/scopes/current', undefined, tester)).status, 401);
});

test('testAuthenticateGet: tester holds test:* and auth:create-client:test:*, needs test:authenticate-get; by header or bewit', async () => {
  const url = `${t.rootUrl}/api/auth/v1/test-authenticate-get/`;
  const get = async (credentials: Credentials, options: { authorizedScopes?: string[] } = {}) => {
    const res = await fetch(url, { headers: { authorization: hawkHeader(url, 'GET', credentials, options) } });
    return { status: res.status, body: (await res.json()) as any };
  };
  // in Taskcluster's order: assume:anonymous merged into the client's scopes as they are listed
  assert.deepEqual(await get(tester), { status: 200, body: { clientId: 'tester', scopes: ['assume:anonymous', 'test:*', 'auth:create-client:test:*'] } });
  assert.equal((await get(tester, { authorizedScopes: ['test:scopes-abc'] })).status, 403);
  assert.equal((await get({ ...tester, accessToken: 'wrong' })).status, 401);
  const bewit = hawk.client.getBewit(url, {
    credentials: hawkOf(tester),
    ttlSec: 60,
    ext: Buffer.from(JSON.stringify({ authorizedScopes: ['test:authenticate-get', 'test:foo'] })).toString('base64'),
  });
  const viaBewit = await fetch(`${url}?bewit=${bewit}`);
  assert.equal(viaBewit.status, 200);
  assert.deepEqual(((await viaBewit.json()) as any).scopes, ['assume:anonymous', 'test:authenticate-get', 'test:foo']);
});
