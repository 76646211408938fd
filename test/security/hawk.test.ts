import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import hawk from 'hawk';
import slugid from 'slugid';
import { startTestApi, hawkHeader, type TestApi } from '../../support/api.js';
import { NonceCache } from '../../src/auth/nonceCache.js';
import { ISSUER_CLIENT_ID } from '../../src/auth/clients.js';
import { createTemporaryCredentials } from '../../src/auth/temporaryCredentials.js';
import { ROOT_CLIENT_ID } from '../../src/config.js';
import { ISSUER_REFRESH_MS } from '../../src/auth/issuer.js';
import { fastTask } from '../../support/graphs.js';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

let t: TestApi;
before(async () => {
  t = await startTestApi();
});
after(async () => {
  await t.close();
});

const SKEW = 15 * 60;

test('the nonce cache refuses a replay within the window and forgets what Hawk would refuse anyway', () => {
  const cache = new NonceCache(SKEW);
  const now = 1_700_000_000_000;
  const ts = String(now / 1000);
  cache.check('key', 'n1', ts, now);
  assert.throws(() => cache.check('key', 'n1', ts, now + 60_000), /replayed/);
  cache.check('other-key', 'n1', ts, now);
  cache.check('key', 'n1', String(now / 1000 + 1), now);
  assert.equal(cache.entries, 3);
  // A timestamp Hawk refuses as stale is not stored.
  cache.check('key', 'n2', String(now / 1000 - SKEW - 1), now);
  assert.equal(cache.entries, 3);
  // Once the clock has moved past the skew window the old buckets are dropped.
  cache.check('key', 'n3', String(now / 1000 + SKEW + 120), now + (SKEW + 120) * 1000);
  assert.equal(cache.entries, 1);
});

test('the nonce cache is bounded in size: the oldest bucket goes first', () => {
  const cache = new NonceCache(SKEW, 1000);
  const now = 1_700_000_000_000;
  for (let i = 0; i < 5000; i++) cache.check('key', `n${i}`, String(Math.floor(now / 1000) - 600 + Math.floor(i / 100) * 10), now);
  assert.ok(cache.entries <= 1000, `${cache.entries} entries`);
  // The newest requests are still protected.
  assert.throws(() => cache.check('key', 'n4999', String(Math.floor(now / 1000) - 600 + 49 * 10), now), /replayed/);
});

test('a replayed request is refused with 401', async () => {
  const url = `${t.rootUrl}/api/auth/v1/scopes/current`;
  const authorization = hawkHeader(url, 'GET', t.root);
  assert.equal((await fetch(url, { headers: { authorization } })).status, 200);
  const replay = await fetch(url, { headers: { authorization } });
  assert.equal(replay.status, 401);
  assert.match(((await replay.json()) as { message: string }).message, /nonce/);
});

test('a forged certificate signature is refused (compared in constant time)', async () => {
  const creds = createTemporaryCredentials({
    issuerClientId: ROOT_CLIENT_ID,
    issuerAccessToken: t.root.accessToken,
    scopes: ['auth:current-scopes'],
    start: new Date(Date.now() - 60_000),
    expiry: new Date(Date.now() + 600_000),
  });
  const ok = await t.request('GET', '/api/auth/v1/scopes/current', undefined, creds);
  assert.equal(ok.status, 200);
  const cert = JSON.parse(creds.certificate);
  for (const signature of [cert.signature.replace(/^./, (c: string) => (c === 'A' ? 'B' : 'A')), cert.signature.slice(1), '']) {
    const res = await t.request('GET', '/api/auth/v1/scopes/current', undefined, { ...creds, certificate: JSON.stringify({ ...cert, signature }) });
    assert.equal(res.status, 401, signature);
    assert.match(res.body.message, /invalid signature|signature/);
  }
});

test('the issuer client cannot authenticate requests with its own token', async () => {
  const { rows } = await t.db.pool.query<{ access_token: string }>('SELECT access_token FROM clients WHERE client_id = $1', [ISSUER_CLIENT_ID]);
  const issuer = { clientId: ISSUER_CLIENT_ID, accessToken: rows[0].access_token };
  const res = await t.request('GET', '/api/auth/v1/scopes/current', undefined, issuer);
  assert.equal(res.status, 401);
  assert.match(res.body.message, /only issues credentials/);
  const bewit = hawk.client.getBewit(`${t.rootUrl}/api/auth/v1/scopes/current`, { credentials: { id: issuer.clientId, key: issuer.accessToken, algorithm: 'sha256' }, ttlSec: 60 });
  assert.equal((await fetch(`${t.rootUrl}/api/auth/v1/scopes/current?bewit=${bewit}`)).status, 401);
  // Credentials it issued work (claimWork hands these to workers).
  const issued = createTemporaryCredentials({
    issuerClientId: ISSUER_CLIENT_ID,
    issuerAccessToken: issuer.accessToken,
    clientId: 'task-client/x',
    scopes: ['auth:current-scopes'],
    start: new Date(Date.now() - 60_000),
    expiry: new Date(Date.now() + 600_000),
  });
  await t.db.pool.query("UPDATE clients SET scopes = '{*}' WHERE client_id = $1", [ISSUER_CLIENT_ID]);
  const res2 = await t.request('GET', '/api/auth/v1/scopes/current', undefined, issued);
  assert.equal(res2.status, 200, JSON.stringify(res2.body));
  // Nor wrapped in a certificate it signs for itself (unnamed temporary credentials of the issuer), with any scopes.
  for (const scopes of [['*'], ['auth:current-scopes']]) {
    const selfIssued = createTemporaryCredentials({
      issuerClientId: ISSUER_CLIENT_ID,
      issuerAccessToken: issuer.accessToken,
      scopes,
      start: new Date(Date.now() - 60_000),
      expiry: new Date(Date.now() + 600_000),
    });
    assert.equal(selfIssued.clientId, ISSUER_CLIENT_ID);
    const res3 = await t.request('GET', '/api/auth/v1/scopes/current', undefined, selfIssued);
    assert.equal(res3.status, 401, `${scopes}: ${JSON.stringify(res3.body)}`);
    assert.match(res3.body.message, /only issues credentials/);
  }
});

test('rotating the issuer token takes effect in a running API within seconds: what the old token signed stops working', async () => {
  const taskId = slugid.nice();
  assert.equal((await t.request('PUT', `/api/queue/v1/task/${taskId}`, { ...fastTask('rotate'), workerType: 'rotate' })).status, 200);
  const claim = await t.request('POST', '/api/queue/v1/claim-work/tgs-test/rotate', { workerGroup: 'g', workerId: 'w', tasks: 1 });
  const runCredentials = claim.body.tasks[0].credentials;
  const artifact = await t.request('POST', `/api/queue/v1/task/${taskId}/runs/0/artifacts/public/a.txt`, { storageType: 's3', contentType: 'text/plain', expires: new Date(Date.now() + 3600_000).toISOString() }, runCredentials);
  assert.equal(artifact.status, 200, JSON.stringify(artifact.body));
  assert.equal((await t.request('GET', `/api/queue/v1/task/${taskId}/status`, undefined, runCredentials)).status, 200, 'before: the run credentials work');
  // the operator's rotation after a leak (docs/security.md): `tgs rotate-issuer-token`
  const rotated = await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', 'rotate-issuer-token'], { env: { ...process.env, DATABASE_URL: t.db.url } });
  assert.match(rotated.stdout, /rotated the token of static\/tgs\/queue/);
  const deadline = Date.now() + ISSUER_REFRESH_MS + 3000;
  let status = 200;
  while (status === 200 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 250));
    status = (await t.request('GET', `/api/queue/v1/task/${taskId}/status`, undefined, runCredentials)).status;
  }
  assert.equal(status, 401, 'credentials signed with the old token stop working');
  assert.equal((await fetch(artifact.body.putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'x' })).status, 401, 'so do URLs it signed');
  // what the new token signs works: a new claim's credentials
  assert.equal((await t.request('PUT', `/api/queue/v1/task/${slugid.nice()}`, { ...fastTask('rotate2'), workerType: 'rotate' })).status, 200);
  const claim2 = await t.request('POST', '/api/queue/v1/claim-work/tgs-test/rotate', { workerGroup: 'g', workerId: 'w', tasks: 1 });
  assert.equal((await t.request('GET', `/api/queue/v1/task/${taskId}/status`, undefined, claim2.body.tasks[0].credentials)).status, 200);
});

test('bad %-escapes in a bewit, a route parameter or a UI path are 400 InputError, not 500', async () => {
  for (const path of [
    '/api/auth/v1/scopes/current?bewit=%E0%A4%A',
    `/api/queue/v1/task/${slugid.nice()}/artifacts/public%E0%A4%A`,
    '/api/queue/v1/task/%E0%A4%A/status',
    '/ui/task-graph/%E0%A4%A',
    '/ui/%ZZ.js',
    // the router decodes %25 to %, the UI decodes the rest: a bad escape one level down
    '/ui/%25zz',
    '/ui/task/%25E0%25A4%25A',
  ]) {
    const res = await fetch(`${t.rootUrl}${path}`);
    assert.equal(res.status, 400, path);
    const body = (await res.json()) as { code: string };
    assert.equal(body.code, 'InputError', path);
  }
});

test('Hawk verifies against TGS_ROOT_URL: a client behind a TLS proxy authenticates, the Host header is not trusted', async () => {
  const direct = t.config.rootUrl;
  t.config.rootUrl = 'https://tgs.example.com';
  try {
    const path = '/api/auth/v1/scopes/current';
    // What a client of https://tgs.example.com signs; the proxy forwards it to this process.
    const viaProxy = hawkHeader(`https://tgs.example.com${path}`, 'GET', t.root);
    const res = await fetch(`${direct}${path}`, { headers: { authorization: viaProxy } });
    assert.equal(res.status, 200, await res.clone().text());
    // Signed for the address it was sent to, which is not the root URL: refused.
    const res2 = await fetch(`${direct}${path}`, { headers: { authorization: hawkHeader(`${direct}${path}`, 'GET', t.root) } });
    assert.equal(res2.status, 401);
  } finally {
    t.config.rootUrl = direct;
  }
  // With a loopback root URL, localhost and 127.0.0.1 both work (development).
  const port = new URL(direct).port;
  const local = `http://localhost:${port}/api/auth/v1/scopes/current`;
  assert.equal((await fetch(local, { headers: { authorization: hawkHeader(local, 'GET', t.root) } })).status, 200);
});

test('the same client token signing for another host or port is refused', async () => {
  const url = `${t.rootUrl}/api/auth/v1/scopes/current`;
  const wrongPort = hawkHeader(url.replace(/:(\d+)\//, (_m, p: string) => `:${Number(p) + 1}/`), 'GET', t.root);
  assert.equal((await fetch(url, { headers: { authorization: wrongPort } })).status, 401);
  const token = randomBytes(4).toString('hex');
  assert.equal((await fetch(url, { headers: { authorization: hawkHeader(url, 'GET', { ...t.root, accessToken: token }) } })).status, 401);
});
