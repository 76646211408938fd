import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { startTestApi, type TestApi } from '../../support/api.js';
import { resolveCredentials } from '../../src/client/credentials.js';

const repo = fileURLToPath(new URL('../..', import.meta.url));

let t: TestApi;
before(async () => {
  t = await startTestApi();
});
after(async () => {
  await t.close();
});

interface Run {
  code: number;
  stdout: string;
  stderr: string;
}

/** `tgs <args>` from source, with only the variables given (plus PATH/HOME for node). */
function tgs(args: string[], env: Record<string, string>): Promise<Run> {
  return new Promise((resolve) => {
    execFile(
      process.execPath,
      ['--import', 'tsx', 'src/cli/entry.ts', ...args],
      { cwd: repo, env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '', ...env }, timeout: 60_000 },
      (err, stdout, stderr) => resolve({ code: err ? ((err as { code?: number }).code ?? 1) : 0, stdout, stderr }),
    );
  });
}

const rootEnv = () => ({ TGS_ROOT_URL: t.rootUrl, TGS_CLIENT_ID: t.root.clientId, TGS_ACCESS_TOKEN: t.root.accessToken });

test('client create prints the access token, which then works; list shows it; delete removes it', async () => {
  const created = await tgs(['client', 'create', 'cli/worker', '--scope', 'queue:claim-work:p/w', '-s', 'auth:current-scopes', '--description', 'a worker', '--expires', '30d'], rootEnv());
  assert.equal(created.code, 0, created.stderr);
  const token = /accessToken\s+(\S+)/.exec(created.stdout)?.[1];
  assert.ok(token, created.stdout);
  assert.match(created.stdout, new RegExp(`export TGS_ACCESS_TOKEN=${token}`));
  const row = await t.db.pool.query<{ scopes: string[]; description: string; expires: Date }>('SELECT scopes, description, expires FROM clients WHERE client_id = $1', ['cli/worker']);
  assert.deepEqual(row.rows[0].scopes, ['queue:claim-work:p/w', 'auth:current-scopes']);
  assert.equal(row.rows[0].description, 'a worker');
  const days = (row.rows[0].expires.getTime() - Date.now()) / 86_400_000;
  assert.ok(days > 29.9 && days < 30.1, `expires in 30 days, got ${days}`);

  const mine = await t.request('GET', '/api/auth/v1/scopes/current', undefined, { clientId: 'cli/worker', accessToken: token });
  assert.equal(mine.status, 200);

  // the new client's own credentials through Taskcluster's variables: it may not list clients
  const asWorker = await tgs(['client', 'list'], { TASKCLUSTER_ROOT_URL: t.rootUrl, TASKCLUSTER_CLIENT_ID: 'cli/worker', TASKCLUSTER_ACCESS_TOKEN: token });
  assert.equal(asWorker.code, 1);
  assert.match(asWorker.stderr, /auth:list-clients/);

  const listed = await tgs(['client', 'list', '--prefix', 'cli/'], rootEnv());
  assert.equal(listed.code, 0, listed.stderr);
  assert.match(listed.stdout, /^CLIENT ID/);
  assert.match(listed.stdout, /cli\/worker\s+\S+\s+queue:claim-work:p\/w auth:current-scopes/);
  const json = await tgs(['client', 'list', '--json'], rootEnv());
  assert.ok((JSON.parse(json.stdout) as { clientId: string }[]).some((c) => c.clientId === 'cli/worker'));

  const deleted = await tgs(['client', 'delete', 'cli/worker'], rootEnv());
  assert.equal(deleted.code, 0, deleted.stderr);
  assert.match(deleted.stdout, /deleted client cli\/worker/);
  assert.equal((await t.request('GET', '/api/auth/v1/scopes/current', undefined, { clientId: 'cli/worker', accessToken: token })).status, 401);
  const again = await tgs(['client', 'delete', 'cli/worker'], rootEnv());
  assert.equal(again.code, 1);
  assert.match(again.stderr, /no client cli\/worker/);
});

test('errors say what to do next, with exit code 1', async () => {
  const unreachable = await tgs(['client', 'list'], { ...rootEnv(), TGS_ROOT_URL: 'http://127.0.0.1:9' });
  assert.equal(unreachable.code, 1);
  assert.match(unreachable.stderr, /is `tgs api` or `tgs dev` running at http:\/\/127\.0\.0\.1:9\?/);

  const wrongToken = await tgs(['client', 'list'], { ...rootEnv(), TGS_ACCESS_TOKEN: 'wrong' });
  assert.equal(wrongToken.code, 1);
  assert.match(wrongToken.stderr, /Check TGS_CLIENT_ID\/TGS_ACCESS_TOKEN/);

  const none = await tgs(['client', 'list'], { TGS_ROOT_URL: t.rootUrl });
  assert.equal(none.code, 1);
  assert.match(none.stderr, /TGS_CLIENT_ID and TGS_ACCESS_TOKEN/);

  const half = await tgs(['client', 'list'], { TGS_ROOT_URL: t.rootUrl, TGS_CLIENT_ID: 'x' });
  assert.equal(half.code, 1);
  assert.match(half.stderr, /TGS_ACCESS_TOKEN is not set/);

  const conflict = await tgs(['client', 'create', 'cli/dup', '--description', 'one'], rootEnv());
  assert.equal(conflict.code, 0, conflict.stderr);
  const dup = await tgs(['client', 'create', 'cli/dup', '--description', 'two'], rootEnv());
  assert.equal(dup.code, 1);
  assert.match(dup.stderr, /RequestConflict \(409\)/);

  const badExpiry = await tgs(['client', 'create', 'cli/x', '--expires', 'soonish'], rootEnv());
  assert.equal(badExpiry.code, 1);
  assert.match(badExpiry.stderr, /--expires "soonish"/);
  const count = await t.db.pool.query("SELECT count(*)::int AS n FROM clients WHERE client_id = 'cli/x'");
  assert.equal(count.rows[0].n, 0);
});

test('resolveCredentials: tgs variables first, Taskcluster fallback, a default rootUrl', () => {
  assert.deepEqual(
    resolveCredentials({ TGS_ROOT_URL: 'http://a/', TGS_CLIENT_ID: 'c', TGS_ACCESS_TOKEN: 't', TASKCLUSTER_CLIENT_ID: 'tc', TASKCLUSTER_ACCESS_TOKEN: 'tt' }),
    { rootUrl: 'http://a', credentials: { clientId: 'c', accessToken: 't' }, source: { rootUrl: 'TGS_ROOT_URL', credentials: 'TGS_CLIENT_ID/TGS_ACCESS_TOKEN' } },
  );
  const tc = resolveCredentials({ TASKCLUSTER_ROOT_URL: 'https://tc.example.com', TASKCLUSTER_CLIENT_ID: 'tc', TASKCLUSTER_ACCESS_TOKEN: 'tt' });
  assert.equal(tc.rootUrl, 'https://tc.example.com');
  assert.deepEqual(tc.credentials, { clientId: 'tc', accessToken: 'tt' });
  const anonymous = resolveCredentials({});
  assert.equal(anonymous.rootUrl, 'http://127.0.0.1:8080');
  assert.equal(anonymous.credentials, undefined);
  assert.throws(() => resolveCredentials({ TASKCLUSTER_ACCESS_TOKEN: 'x' }), /TASKCLUSTER_CLIENT_ID is not set/);
  assert.throws(() => resolveCredentials({ TGS_ROOT_URL: 'localhost:8080' }), /TGS_ROOT_URL must be an http\(s\) URL/);
});
