import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import amqp from 'amqplib';
import pg from 'pg';
import slugid from 'slugid';
import { ApiClient } from '../../src/client/http.js';
import { bridgeQueueName } from '../../src/bridge/bridge.js';
import { loadConfig } from '../../src/config.js';
import { defaultPostgresUrl } from '../../support/db.js';
import { startFastWorker } from '../../support/fastWorker.js';
import { graphOf } from '../../support/graphs.js';
import { eventually } from '../../support/stack.js';
import { startTestTemporal } from '../../support/temporal.js';
import type { DevServer } from '../../src/temporal/devServer.js';
import { startApiProcess, type ApiProcess } from '../helpers/apiProcess.js';

// tgs on Postgres as a managed service gives it: deploy/postgres/tgs-roles.psql (what docker-compose.yml's Postgres
// runs at its first start) makes a database, an owner role for `tgs migrate` and an app role with row grants only.
// Roles are the server's, not a database's: this file makes its own, with a random suffix, and drops them.
const suffix = randomBytes(4).toString('hex');
const names = { db: `tgs_test_roles_${suffix}`, owner: `tgs_test_owner_${suffix}`, app: `tgs_test_app_${suffix}`, admin: `tgs_test_admin_${suffix}` };
const passwords = { owner: randomBytes(12).toString('hex'), app: randomBytes(12).toString('hex') };
const server = defaultPostgresUrl();
const urlAs = (role: string, password: string, db = names.db) => {
  const url = new URL(server);
  url.username = role;
  url.password = password;
  url.pathname = `/${db}`;
  return url.toString();
};
const ownerUrl = urlAs(names.owner, passwords.owner);
const appUrl = urlAs(names.app, passwords.app);
/** The server's administrator, as the test server's URL names it (a superuser here): sets up and breaks things. */
let admin: pg.Client;
let owner: pg.Pool;

/** Errors the test's own sessions emitted between queries (an ended session): named at the end, not a crash. */
const sessionErrors: string[] = [];

before(async () => {
  admin = new pg.Client({ connectionString: `${server}/postgres` });
  admin.on('error', (err) => sessionErrors.push(`admin: ${err.message}`));
  await admin.connect();
  // The script runs as a managed service's admin role would: CREATEROLE and CREATEDB, no superuser.
  await admin.query(`CREATE ROLE ${names.admin} LOGIN CREATEROLE CREATEDB`);
  const run = spawnSync(
    'psql',
    [
      '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-v', `db=${names.db}`, '-v', `owner_role=${names.owner}`, '-v', `owner_password=${passwords.owner}`,
      '-v', `app_role=${names.app}`, '-v', `app_password=${passwords.app}`, '-f', 'deploy/postgres/tgs-roles.psql', urlAs(names.admin, '', 'postgres'),
    ],
    { encoding: 'utf8' },
  );
  assert.equal(run.status, 0, `psql -f deploy/postgres/tgs-roles.psql:\n${run.stdout}${run.stderr}`);
  owner = new pg.Pool({ connectionString: ownerUrl, max: 2 });
  owner.on('error', (err) => sessionErrors.push(`owner: ${err.message}`));
});


/** Runs `tgs <args>` to its end; its exit code and output. */
function tgs(args: string[], env: Record<string, string>): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', ...args], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    child.once('exit', (code) => resolve({ code, output }));
  });
}

test('the roles, made by an admin role that is no superuser: neither is a superuser, the app role may not create or alter anything, the admin is no member of the owner afterwards, nobody else may connect', async () => {
  assert.equal((await admin.query<{ member: boolean }>('SELECT pg_has_role($1, $2, \'MEMBER\') AS member', [names.admin, names.owner])).rows[0].member, false);
  const { rows } = await admin.query<{ rolname: string; rolsuper: boolean; rolcreatedb: boolean; rolcreaterole: boolean }>(
    'SELECT rolname, rolsuper, rolcreatedb, rolcreaterole FROM pg_roles WHERE rolname = ANY($1) ORDER BY rolname',
    [[names.owner, names.app]],
  );
  assert.deepEqual(rows.map((r) => [r.rolsuper, r.rolcreatedb, r.rolcreaterole]), [[false, false, false], [false, false, false]]);
  const app = new pg.Client({ connectionString: appUrl });
  await app.connect();
  try {
    await assert.rejects(app.query('CREATE TABLE tgs.intruder (x int)'), { code: '42501' });
    await assert.rejects(app.query('CREATE TABLE public.intruder (x int)'), { code: '42501' });
    await assert.rejects(app.query('CREATE SCHEMA intruder'), { code: '42501' });
  } finally {
    await app.end();
  }
  // a role of the server without a grant on the database: PUBLIC's CONNECT was revoked
  const stranger = `tgs_test_stranger_${suffix}`;
  await admin.query(`CREATE ROLE ${stranger} LOGIN`);
  try {
    const client = new pg.Client({ connectionString: urlAs(stranger, '') });
    client.on('error', () => undefined);
    await assert.rejects(client.connect(), { code: '42501' });
    await client.end().catch(() => undefined);
  } finally {
    await admin.query(`DROP ROLE ${stranger}`);
  }
});

test('before `tgs migrate`, `tgs api` and `tgs scheduler-worker` as the app role stop at once saying to run `tgs migrate` as the owner role, and write nothing', async () => {
  const runs = await Promise.all([tgs(['api'], { DATABASE_URL: appUrl, PORT: '0' }), tgs(['scheduler-worker'], { DATABASE_URL: appUrl, TEMPORAL_ADDRESS: '127.0.0.1:1' })]);
  for (const { code, output } of runs) {
    assert.notEqual(code, 0, output);
    assert.match(output, /\d+ database migration\(s\) pending \(001_queue, /);
    assert.match(output, /run `tgs migrate` as the owner role/);
  }
  const { rows } = await owner.query<{ n: number }>(`SELECT count(*)::int AS n FROM pg_tables WHERE schemaname = 'tgs'`);
  assert.equal(rows[0].n, 0, 'no table was made');
});

test('`tgs migrate` as the owner role applies every migration (none needs a superuser); run again it has nothing to do', async () => {
  const first = await tgs(['migrate'], { DATABASE_URL: ownerUrl });
  assert.equal(first.code, 0, first.output);
  assert.match(first.output, /applied \d+ migration\(s\) \(001_queue … \d{3}_\w+\)/);
  assert.equal(first.output.match(/applied/g)?.length, 1, 'one line for every migration');
  const again = await tgs(['migrate'], { DATABASE_URL: ownerUrl });
  assert.equal(again.code, 0, again.output);
  assert.match(again.output, /database is up to date/);
  // every object of tgs is the owner role's, in its schema
  const { rows } = await owner.query<{ schemaname: string; tableowner: string }>(
    `SELECT DISTINCT schemaname, tableowner FROM pg_tables WHERE tableowner IN ($1, $2) OR schemaname = 'tgs'`,
    [names.owner, names.app],
  );
  assert.deepEqual(rows, [{ schemaname: 'tgs', tableowner: names.owner }]);
});

let temporal: DevServer | undefined;
const children: ChildProcess[] = [];

test('a graph runs to its end with `tgs api`, `relay`, `bridge` and `scheduler-worker` all connected as the app role', { timeout: 240_000 }, async () => {
  temporal = await startTestTemporal();
  const env = {
    DATABASE_URL: appUrl,
    TEMPORAL_ADDRESS: temporal.address,
    TGS_TASK_QUEUE: `tgs-roles-${suffix}`,
    TGS_EXCHANGE_PREFIX: `test-roles-${suffix}/`,
  };
  const api = await startApiProcess(appUrl, env);
  children.push(api.child);
  for (const command of ['relay', 'bridge', 'scheduler-worker']) {
    const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', command], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let output = '';
    for (const stream of [child.stdout, child.stderr]) stream.on('data', (d: Buffer) => (output += d.toString()));
    child.once('exit', (code) => (code ? console.error(`tgs ${command} exited ${code}:\n${output}`) : undefined));
    children.push(child);
  }
  const worker = startFastWorker({ rootUrl: api.rootUrl, credentials: api.root, provisionerId: 'tgs-test', workerType: 'fast' });
  try {
    const client = new ApiClient(api.rootUrl, api.root);
    const id = slugid.nice();
    await client.request('scheduler', 'PUT', `/task-graph/${id}`, graphOf({ build: {}, test: { requires: ['build'] }, package: { requires: ['build', 'test'] } }));
    await eventually(
      async () => (await client.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${id}/status`)).status.state === 'finished',
      'the graph finished',
      180_000,
    );
    assert.equal(worker.reported.length, 3);
    for (const child of children) assert.equal(child.exitCode, null, 'every process still runs');
    // the relay published (and deleted) every message as the app role
    await eventually(async () => (await owner.query<{ n: number }>('SELECT count(*)::int AS n FROM outbox')).rows[0].n === 0, 'the outbox drained');
  } finally {
    await worker.stop();
    for (const child of children) child.kill('SIGTERM');
    const connection = await amqp.connect(loadConfig().amqpUrl);
    await (await connection.createChannel()).deleteQueue(bridgeQueueName({ exchangePrefix: env.TGS_EXCHANGE_PREFIX, schedulerId: loadConfig().schedulerId }));
    await connection.close();
  }
});

let outageApi: ApiProcess | undefined;

// One hook, in this order: the processes end before their database goes. (Hooks run in the order they are declared,
// and the database used to be dropped first: a process reconnecting as its sessions were ended could open a new one
// inside DROP DATABASE … WITH (FORCE)'s wait, which then failed the file in CI with every test passed.)
after(async () => {
  if (outageApi && outageApi.child.exitCode === null) {
    outageApi.child.kill('SIGTERM');
    await outageApi.exited;
  }
  const running = children.filter((child) => child.exitCode === null && child.signalCode === null);
  await Promise.all(running.map((child) => new Promise((resolve) => child.once('exit', resolve).kill('SIGKILL'))));
  await temporal?.stop();
  await owner?.end();
  // nothing may log in as the app role while its database and the role go
  await admin.query(`ALTER ROLE ${names.app} NOLOGIN`).catch(() => undefined);
  await admin.query(`DROP DATABASE IF EXISTS ${names.db} WITH (FORCE)`);
  await admin.query(`DROP ROLE IF EXISTS ${names.app}`);
  await admin.query(`DROP ROLE IF EXISTS ${names.owner}`);
  await admin.query(`DROP ROLE IF EXISTS ${names.admin}`);
  await admin.end();
  assert.deepEqual(sessionErrors, [], 'the test\'s own Postgres sessions saw no error');
});

test('Postgres refusing the app role for a while (NOLOGIN, then its CONNECTION LIMIT reached): requests get 503 in Taskcluster\'s shape, never a hang or a crash; each outage and its recovery are logged once; then all works', { timeout: 180_000 }, async () => {
  outageApi = await startApiProcess(appUrl, { TGS_LOG_FORMAT: 'json' });
  const api = outageApi;
  const client = new ApiClient(api.rootUrl, api.root);
  const task = (name: string) => ({
    provisionerId: 'tgs-test',
    workerType: 'outage',
    created: new Date().toISOString(),
    deadline: new Date(Date.now() + 3600_000).toISOString(),
    payload: {},
    metadata: { name, description: 'created around a Postgres outage', owner: 'tests@example.com', source: 'https://example.com/tgs' },
  });
  const before = slugid.nice();
  await client.request('queue', 'PUT', `/task/${before}`, task('before'));
  const count = (text: string) => api.output().split('\n').filter((l) => l.includes(text)).length;
  // What a failover or maintenance does (the role may not log in) and what a full server does (no connection slot
  // left: 53300), each with the role's sessions ended.
  const outages = [
    { name: 'NOLOGIN', start: `ALTER ROLE ${names.app} NOLOGIN`, end: `ALTER ROLE ${names.app} LOGIN` },
    { name: 'CONNECTION LIMIT 0', start: `ALTER ROLE ${names.app} CONNECTION LIMIT 0`, end: `ALTER ROLE ${names.app} CONNECTION LIMIT -1` },
  ];
  for (const [n, outage] of outages.entries()) {
    await admin.query(outage.start);
    // A session the API was opening as the ALTER committed got past the login check before it and can show up in
    // pg_stat_activity only after a first look: end the role's sessions until two looks 100 ms apart find none.
    let quiet = 0;
    while (quiet < 2) {
      const { rowCount } = await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = $1', [names.app]);
      quiet = rowCount ? 0 : quiet + 1;
      await new Promise((r) => setTimeout(r, 100));
    }
    const answers: { request: string; status?: number; body?: { code?: string; message?: string; requestInfo?: unknown } }[] = [];
    for (let i = 0; i < 5; i++) {
      const settle = (call: Promise<unknown>) =>
        call.then(
          () => ({ status: 200 }),
          (err: { status?: number; body?: { code?: string } }) => ({ status: err.status, body: err.body }),
        );
      const [created, status, claimed] = await Promise.all([
        settle(client.request('queue', 'PUT', `/task/${slugid.nice()}`, task(`during ${i}`))),
        settle(client.request('queue', 'GET', `/task/${before}/status`)),
        settle(client.request('queue', 'POST', '/claim-work/tgs-test/outage', { workerGroup: 'g', workerId: 'w', tasks: 1 })),
      ]);
      answers.push({ request: 'createTask', ...created }, { request: 'status', ...status }, { request: 'claimWork', ...claimed });
      await new Promise((r) => setTimeout(r, 300));
    }
    assert.equal(api.child.exitCode, null, `tgs api exited:\n${api.output()}`);
    for (const answer of answers) {
      assert.equal(answer.status, 503, `${outage.name}: every answer during the outage is a 503: ${JSON.stringify(answer)}`);
      assert.equal(answer.body?.code, 'ServiceUnavailable');
      assert.match(answer.body?.message ?? '', /retry shortly/);
      assert.ok(answer.body?.requestInfo, 'Taskcluster\'s shape: {code, message, requestInfo}');
    }
    await admin.query(outage.end);
    const afterId = slugid.nice();
    await eventually(async () => client.request('queue', 'PUT', `/task/${afterId}`, task('after')).then(() => true), `${outage.name}: createTask works again`, 30_000);
    const status = await client.request<{ status: { taskId: string; state: string } }>('queue', 'GET', `/task/${afterId}/status`);
    assert.equal(status.status.state, 'pending');
    assert.equal(count('API: Postgres unavailable'), n + 1, `${outage.name}: one line for the outage:\n${api.output()}`);
    assert.equal(count('API: Postgres back after'), n + 1, `${outage.name}: one line for its recovery:\n${api.output()}`);
  }
  // each line says why: the first failure is the ended session or the refused login, whichever a request met first
  for (const line of api.output().split('\n').filter((l) => l.includes('API: Postgres unavailable'))) {
    assert.match(line, /unavailable \((terminating connection|[^)]*not permitted to log in|[^)]*too many connections)/, line);
  }
  assert.doesNotMatch(api.output(), /internal error|uncaught/i);
});
