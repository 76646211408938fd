import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApi, type TestApi } from '../../support/api.js';
import { runTgs } from '../helpers/cli.js';

let t: TestApi;
before(async () => {
  t = await startTestApi();
});
after(async () => {
  await t.close();
});

const rootEnv = () => ({ TGS_ROOT_URL: t.rootUrl, TGS_CLIENT_ID: t.root.clientId, TGS_ACCESS_TOKEN: t.root.accessToken });

test('role create, grant, list and show; a second create and an unknown role say what to run', async () => {
  const created = await runTgs(['role', 'create', 'hook-id:ux/heartbeat', '--scope', 'queue:create-task:highest:tgs-dev/shell', '-d', 'the heartbeat hook'], rootEnv());
  assert.equal(created.code, 0, created.stderr);
  assert.match(created.stdout, /^roleId\s+hook-id:ux\/heartbeat$/m);
  const row = await t.db.pool.query<{ scopes: string[]; description: string }>('SELECT scopes, description FROM roles WHERE role_id = $1', ['hook-id:ux/heartbeat']);
  assert.deepEqual(row.rows[0].scopes, ['queue:create-task:highest:tgs-dev/shell']);
  assert.equal(row.rows[0].description, 'the heartbeat hook');

  const again = await runTgs(['role', 'create', 'hook-id:ux/heartbeat', '--scope', 'x'], rootEnv());
  assert.equal(again.code, 1);
  assert.match(again.stderr, /role hook-id:ux\/heartbeat exists: add scopes with tgs role grant hook-id:ux\/heartbeat <scope>/);

  const granted = await runTgs(['role', 'grant', 'hook-id:ux/heartbeat', 'queue:scheduler-id:-', 'queue:create-task:highest:tgs-dev/shell'], rootEnv());
  assert.equal(granted.code, 0, granted.stderr);
  const after = await t.db.pool.query<{ scopes: string[] }>('SELECT scopes FROM roles WHERE role_id = $1', ['hook-id:ux/heartbeat']);
  assert.deepEqual([...after.rows[0].scopes].sort(), ['queue:create-task:highest:tgs-dev/shell', 'queue:scheduler-id:-']);
  // grant creates a role there is none of
  const fresh = await runTgs(['role', 'grant', 'project:cli', 'queue:route:index.cli.*'], rootEnv());
  assert.equal(fresh.code, 0, fresh.stderr);

  const listed = await runTgs(['role', 'list', '--prefix', 'hook-id:'], rootEnv());
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /^ROLE ID\s+SCOPES$/m);
  assert.match(listed.stdout, /^hook-id:ux\/heartbeat\s+queue:create-task:highest:tgs-dev\/shell queue:scheduler-id:-$/m);
  assert.doesNotMatch(listed.stdout, /project:cli/);

  const shown = await runTgs(['role', 'show', 'project:cli', '--json'], rootEnv());
  assert.deepEqual((JSON.parse(shown.stdout) as { scopes: string[] }).scopes, ['queue:route:index.cli.*']);
  const missing = await runTgs(['role', 'show', 'nope'], rootEnv());
  assert.equal(missing.code, 1);
  assert.match(missing.stderr, /no role nope \(see `tgs role list`; create it with tgs role create nope --scope <scope>\)/);
});

test('--version prints the package version and node\'s', async () => {
  const run = await runTgs(['--version'], {});
  assert.equal(run.code, 0, run.stderr);
  assert.match(run.stdout, /^tgs \d+\.\d+\.\d+ \(node v\d+\.\d+\.\d+\)\n$/);
});
