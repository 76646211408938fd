import { afterEach, beforeEach, mock, test } from 'node:test';
import assert from 'node:assert/strict';
import hawk from 'hawk';
import { createAuthenticator, type ClientRecord, type RequestForAuth } from '../../src/auth/authenticate.js';
import { CertificateCache } from '../../src/auth/certificateCache.js';
import { generateAccessToken } from '../../src/auth/clients.js';
import { expandingClientStore, type RoleCache } from '../../src/auth/roleStore.js';
import { ScopeExpander, type Role } from '../../src/auth/roles.js';
import { createTemporaryCredentials, type TemporaryCredentials } from '../../src/auth/temporaryCredentials.js';

const rootUrl = 'http://127.0.0.1:8080';
const ISSUER = 'project/issuer';

// The clock is mocked so that a cached certificate can be carried past its expiry; Hawk's timestamps follow it.
beforeEach(() => mock.timers.enable({ apis: ['Date'], now: 1_700_000_000_000 }));
afterEach(() => mock.timers.reset());

/** An API's authenticator over clients in memory, expanded through roles by the API's own expandingClientStore. */
function setUp(options: { maxEntries?: number; roles?: Role[] } = {}) {
  const clients = new Map<string, ClientRecord>();
  clients.set(ISSUER, {
    clientId: ISSUER,
    accessToken: generateAccessToken(),
    scopes: ['auth:create-client:worker/*', 'queue:a:*', 'queue:b:*', 'assume:role/x'],
    expires: new Date('9999-12-31'),
  });
  let expander = new ScopeExpander(options.roles ?? [{ roleId: 'role/x', scopes: ['queue:r:*'] }]);
  const roles = { observe: () => undefined, expand: async (scopes: readonly string[]) => expander.expand(scopes) } as unknown as RoleCache;
  const store = expandingClientStore({ get: async (id) => clients.get(id) }, roles);
  const certificates = new CertificateCache(options.maxEntries);
  const authenticate = createAuthenticator(store, { rootUrl: () => rootUrl, expand: (s) => roles.expand(s), certificates });
  const issue = (scopes: string[], name = 'worker/one', lifetimeMs = 20 * 60 * 1000) => {
    const issuer = clients.get(ISSUER) as ClientRecord;
    return createTemporaryCredentials({
      issuerClientId: ISSUER,
      issuerAccessToken: issuer.accessToken,
      clientId: name,
      scopes,
      start: new Date(Date.now() - 60_000),
      expiry: new Date(Date.now() + lifetimeMs),
    });
  };
  return {
    clients,
    certificates,
    authenticate,
    issue,
    setRoles: (next: Role[]) => {
      expander = new ScopeExpander(next);
    },
    issuer: () => clients.get(ISSUER) as ClientRecord,
  };
}

let path = 0;
function request(creds: TemporaryCredentials, options: { authorizedScopes?: string[]; key?: string } = {}): RequestForAuth {
  const url = `/api/queue/v1/x/${path++}`;
  const ext = Buffer.from(
    JSON.stringify({ certificate: JSON.parse(creds.certificate), ...(options.authorizedScopes ? { authorizedScopes: options.authorizedScopes } : {}) }),
  ).toString('base64');
  const { header } = hawk.client.header(`${rootUrl}${url}`, 'GET', {
    credentials: { id: creds.clientId, key: options.key ?? creds.accessToken, algorithm: 'sha256' },
    ext,
  });
  return { method: 'GET', url, host: '127.0.0.1:8080', authorization: header, contentType: '' };
}

/** Authenticates once so the certificate is cached, and checks it was. */
async function cached(s: ReturnType<typeof setUp>, creds: TemporaryCredentials) {
  await s.authenticate(request(creds));
  assert.equal(s.certificates.size, 1);
}

test('a certificate used again is served from the cache, with the same client and scopes', async () => {
  const s = setUp();
  const creds = s.issue(['queue:a:1', 'queue:r:2']);
  const first = await s.authenticate(request(creds));
  assert.deepEqual(s.certificates.stats, { hits: 0, misses: 1, evictions: 0 });
  for (let i = 0; i < 3; i++) {
    const again = await s.authenticate(request(creds));
    assert.deepEqual(again.auth, first.auth);
  }
  assert.deepEqual(s.certificates.stats, { hits: 3, misses: 1, evictions: 0 });
  assert.ok(first.auth.scopes.includes('queue:r:2'));
  // The same certificate with authorizedScopes is another ext: verified (and cached) on its own.
  const narrowed = await s.authenticate(request(creds, { authorizedScopes: ['queue:a:1'] }));
  assert.ok(narrowed.auth.scopes.includes('queue:a:1') && !narrowed.auth.scopes.includes('queue:r:2'));
  assert.equal(s.certificates.size, 2);
  await s.authenticate(request(creds, { authorizedScopes: ['queue:a:1'] }));
  assert.equal(s.certificates.stats.hits, 4);
});

test('a request holds its credentials\' scopes expanded once, and authorizedScopes expanded in turn', async () => {
  const s = setUp();
  // the issuer's client as stored (no roles); every expansion of the request's own scopes recorded
  const expanded: string[][] = [];
  const authenticate = createAuthenticator(
    expandingClientStore({ get: async (id) => s.clients.get(id) }, { observe: () => undefined, expand: async (scopes: readonly string[]) => new ScopeExpander([]).expand(scopes) } as unknown as RoleCache),
    {
      rootUrl: () => rootUrl,
      expand: async (scopes) => {
        expanded.push(scopes);
        return new ScopeExpander([{ roleId: 'role/x', scopes: ['queue:r:*', 'assume:role/y'] }, { roleId: 'role/y', scopes: ['queue:y:1'] }]).expand(scopes);
      },
    },
  );
  const creds = s.issue(['queue:a:1', 'assume:role/x']);
  const plain = await authenticate(request(creds));
  assert.deepEqual(plain.auth.scopes, ['assume:role/x', 'assume:role/y', 'queue:a:1', 'queue:r:*', 'queue:y:1']);
  assert.deepEqual(expanded, [['queue:a:1', 'assume:role/x']], 'the certificate\'s scopes, expanded once');
  expanded.length = 0;
  // authorizedScopes may name a role the credentials hold through another: what it grants is expanded again
  const narrowed = await authenticate(request(creds, { authorizedScopes: ['assume:role/y'] }));
  assert.deepEqual(narrowed.auth.scopes, ['assume:role/y', 'queue:y:1']);
  assert.deepEqual(expanded, [['queue:a:1', 'assume:role/x'], ['assume:role/y']]);
});

test('a cached certificate is still refused once it has expired (same 5-minute drift)', async () => {
  const s = setUp();
  const creds = s.issue(['queue:a:1'], 'worker/one', 60_000);
  await cached(s, creds);
  mock.timers.tick(60_000 + 5 * 60_000 - 1000);
  await s.authenticate(request(creds));
  mock.timers.tick(2000);
  await assert.rejects(s.authenticate(request(creds)), /ext.certificate has expired/);
  assert.equal(s.certificates.stats.hits, 2);
});

test('a cached certificate is refused once its issuer is disabled, expired or deleted', async () => {
  const s = setUp();
  const creds = s.issue(['queue:a:1']);
  await cached(s, creds);
  const issuer = s.issuer();
  s.clients.set(ISSUER, { ...issuer, disabled: true });
  await assert.rejects(s.authenticate(request(creds)), /certificate issuer project\/issuer is disabled/);
  s.clients.set(ISSUER, { ...issuer, expires: new Date(Date.now() - 1) });
  await assert.rejects(s.authenticate(request(creds)), /certificate issuer project\/issuer has expired/);
  s.clients.delete(ISSUER);
  await assert.rejects(s.authenticate(request(creds)), /certificate issuer project\/issuer is not a known client/);
  s.clients.set(ISSUER, issuer);
  await s.authenticate(request(creds));
  assert.equal(s.certificates.stats.hits, 4);
});

test('a cached certificate is refused once its issuer token is reset', async () => {
  const s = setUp();
  const creds = s.issue(['queue:a:1']);
  await cached(s, creds);
  s.clients.set(ISSUER, { ...s.issuer(), accessToken: generateAccessToken() });
  await assert.rejects(s.authenticate(request(creds)), /ext.certificate has an invalid signature/);
  assert.equal(s.certificates.stats.hits, 1);
  assert.equal(s.certificates.size, 0);
});

test('a cached certificate is refused once its issuer loses a scope it granted, or the right to name the client', async () => {
  const s = setUp();
  const creds = s.issue(['queue:a:1', 'queue:b:1']);
  await cached(s, creds);
  const issuer = s.issuer();
  s.clients.set(ISSUER, { ...issuer, scopes: issuer.scopes.filter((x) => x !== 'queue:b:*') });
  await assert.rejects(s.authenticate(request(creds)), /lacks scopes it granted: queue:b:1/);
  s.clients.set(ISSUER, issuer);
  await cached(s, creds);
  s.clients.set(ISSUER, { ...issuer, scopes: issuer.scopes.filter((x) => !x.startsWith('auth:')) });
  await assert.rejects(s.authenticate(request(creds)), /lacks auth:create-client:worker\/one/);
});

test('a cached certificate is refused once a role change takes a granted scope from its issuer', async () => {
  const s = setUp({ roles: [{ roleId: 'role/x', scopes: ['queue:r:*'] }] });
  const creds = s.issue(['queue:r:7']);
  await cached(s, creds);
  s.setRoles([{ roleId: 'role/x', scopes: ['queue:r:6'] }]);
  await assert.rejects(s.authenticate(request(creds)), /lacks scopes it granted: queue:r:7/);
  // A role change that leaves what the issuer holds unchanged keeps the entry.
  s.setRoles([{ roleId: 'role/x', scopes: ['queue:r:*'] }]);
  await cached(s, creds);
  s.setRoles([{ roleId: 'role/x', scopes: ['queue:r:*'] }, { roleId: 'role/unrelated', scopes: ['queue:z:1'] }]);
  await s.authenticate(request(creds));
  assert.equal(s.certificates.stats.hits, 2);
});

test('a failed verification is never cached: a forged certificate, or a request signed with the wrong key', async () => {
  const s = setUp();
  const creds = s.issue(['queue:a:1']);
  const cert = JSON.parse(creds.certificate);
  const forged = { ...creds, certificate: JSON.stringify({ ...cert, scopes: ['queue:a:*'] }) };
  await assert.rejects(s.authenticate(request(forged)), /invalid signature/);
  await assert.rejects(s.authenticate(request(creds, { key: generateAccessToken() })), /Bad mac/);
  assert.equal(s.certificates.size, 0);
  // A certificate the issuer could not grant is refused every time, never served from the cache.
  const beyond = s.issue(['queue:c:1']);
  for (let i = 0; i < 2; i++) await assert.rejects(s.authenticate(request(beyond)), /lacks scopes/);
  assert.equal(s.certificates.size, 0);
  assert.equal(s.certificates.stats.hits, 0);
});

test('the cache holds at most its bound, dropping the least recently used certificate', async () => {
  const s = setUp({ maxEntries: 3 });
  const creds = [0, 1, 2, 3, 4].map((i) => s.issue(['queue:a:1'], `worker/${i}`));
  for (const c of creds.slice(0, 3)) await s.authenticate(request(c));
  await s.authenticate(request(creds[0])); // 0 is now the most recently used
  await s.authenticate(request(creds[3]));
  await s.authenticate(request(creds[4]));
  assert.equal(s.certificates.size, 3);
  assert.equal(s.certificates.stats.evictions, 2);
  const { hits } = s.certificates.stats;
  await s.authenticate(request(creds[0]));
  assert.equal(s.certificates.stats.hits, hits + 1);
  await s.authenticate(request(creds[1]));
  assert.equal(s.certificates.stats.hits, hits + 1);
  assert.equal(s.certificates.size, 3);
});
