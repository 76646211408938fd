import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { loadConfig } from '../../src/config.js';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';

/*
 * Trigger tokens at rest with TGS_HOOK_TOKEN_KEY (src/hooks/tokenCipher.ts): the row holds no token, getTriggerToken
 * and triggerHookWithToken work as before, a sealed token moved to another hook's row does not open, a token stored
 * before the key was set still works.
 */

let api: TestApi;
before(async () => {
  api = await startTestApi({ hookTokenKey: randomBytes(32) });
});
after(async () => {
  await api?.close();
});

const metadata = { name: 'token', description: 'sealed token', owner: 'hooks@example.com' };
const storedToken = async (hookId: string) =>
  (await api.db.pool.query<{ trigger_token: string }>("SELECT trigger_token FROM hooks WHERE hook_group_id = 'sealed' AND hook_id = $1", [hookId])).rows[0].trigger_token;

test('a trigger token is stored sealed, answered and accepted as itself, and refused on another hook', async () => {
  for (const id of ['a', 'b']) assert.equal((await api.request('PUT', `/api/hooks/v1/hooks/sealed/${id}`, { metadata, task: fastTask(id) })).status, 200);
  const { token } = (await api.request('GET', '/api/hooks/v1/hooks/sealed/a/token')).body;
  assert.match(token, /^[A-Za-z0-9_-]{22}$/);
  const stored = await storedToken('a');
  assert.match(stored, /^aes256gcm:/);
  assert.ok(!stored.includes(token));
  // the token authenticates (the hook's role has no scopes: 403 after authentication, not 401); a wrong one does not
  assert.equal((await api.request('POST', `/api/hooks/v1/hooks/sealed/a/trigger/${token}`, {}, null)).status, 403);
  assert.equal((await api.request('POST', '/api/hooks/v1/hooks/sealed/a/trigger/aaaaaaaaaaaaaaaaaaaaaa', {}, null)).status, 401);

  const reset = (await api.request('POST', '/api/hooks/v1/hooks/sealed/a/token')).body.token;
  assert.notEqual(reset, token);
  assert.match(await storedToken('a'), /^aes256gcm:/);
  assert.equal((await api.request('GET', '/api/hooks/v1/hooks/sealed/a/token')).body.token, reset);
  assert.equal((await api.request('POST', `/api/hooks/v1/hooks/sealed/a/trigger/${token}`, {}, null)).status, 401);

  // hook a's sealed token on hook b's row: it does not open there
  await api.db.pool.query("UPDATE hooks SET trigger_token = $1 WHERE hook_group_id = 'sealed' AND hook_id = 'b'", [await storedToken('a')]);
  assert.equal((await api.request('GET', '/api/hooks/v1/hooks/sealed/b/token')).status, 500);
  assert.equal((await api.request('POST', `/api/hooks/v1/hooks/sealed/b/trigger/${reset}`, {}, null)).status, 500);

  // a token stored before the key was set reads as itself
  await api.db.pool.query("UPDATE hooks SET trigger_token = 'plainTokenFromBefore00' WHERE hook_group_id = 'sealed' AND hook_id = 'b'");
  assert.equal((await api.request('GET', '/api/hooks/v1/hooks/sealed/b/token')).body.token, 'plainTokenFromBefore00');
  assert.equal((await api.request('POST', '/api/hooks/v1/hooks/sealed/b/trigger/plainTokenFromBefore00', {}, null)).status, 403);
});

test('TGS_HOOK_TOKEN_KEY must be 32 bytes of base64', () => {
  assert.throws(() => loadConfig({ TGS_HOOK_TOKEN_KEY: 'c2hvcnQ=' }), /32 bytes/);
  assert.equal(loadConfig({ TGS_HOOK_TOKEN_KEY: randomBytes(32).toString('base64') }).hookTokenKey?.length, 32);
  assert.equal(loadConfig({}).hookTokenKey, undefined);
});
