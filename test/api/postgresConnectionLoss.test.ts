import { after, before, test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { ApiClient } from '../../src/client/http.js';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';
import { startApiProcess, type ApiProcess } from '../helpers/apiProcess.js';

// A Postgres restart ends every connection of the API's pool, including the ones checked out by a
// transaction at that moment. Terminating the backends of this test's own database does the same to this
// API alone (other tests' databases are untouched).
let db: TestDatabase;
let api: ApiProcess;

before(async () => {
  db = await createTestDatabase();
  api = await startApiProcess(db.url);
});

after(async () => {
  if (api.child.exitCode === null && api.child.signalCode === null) {
    api.child.kill('SIGTERM');
    await api.exited;
  }
  await db.drop();
});

const taskDefinition = () => ({
  provisionerId: 'tgs-test',
  workerType: 'pg-loss',
  created: new Date().toISOString(),
  deadline: new Date(Date.now() + 3600_000).toISOString(),
  payload: {},
  metadata: { name: 'connection loss', description: 'created while Postgres ends connections', owner: 'tests@example.com', source: 'https://example.com/tgs' },
});

test('terminating every Postgres connection of a busy API fails requests in flight, not the process; it answers again', { timeout: 120_000 }, async () => {
  const client = new ApiClient(api.rootUrl, api.root);
  let stop = false;
  const statuses = new Map<string, number>();
  const count = (key: string) => statuses.set(key, (statuses.get(key) ?? 0) + 1);
  // transactions (createTask), single statements (claimWork) and long-polls in flight all the time
  const load = Array.from({ length: 6 }, async (_, i) => {
    while (!stop && api.child.exitCode === null) {
      const call =
        i % 3 === 2
          ? client.request('queue', 'POST', '/claim-work/tgs-test/pg-loss', { workerGroup: 'g', workerId: `w${i}`, tasks: 1 })
          : client.request('queue', 'PUT', `/task/${slugid.nice()}`, taskDefinition());
      await call.then(
        () => count('ok'),
        (err: unknown) => count(`${(err as { status?: number }).status ?? 'error'}`),
      );
    }
  });
  await new Promise((r) => setTimeout(r, 500));
  for (let i = 0; i < 5; i++) {
    assert.equal(api.child.exitCode, null, `tgs api exited:\n${api.output()}`);
    // the API reconnects on its next query (its LISTEN sessions after a backoff): wait until it has, up to 10 s
    let ended = 0;
    for (const deadline = Date.now() + 10_000; ended === 0 && Date.now() < deadline; ) {
      const { rows } = await db.pool.query<{ n: number }>(
        `SELECT count(*) AS n FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()) t`,
      );
      ended = Number(rows[0].n);
      if (ended === 0) await new Promise((r) => setTimeout(r, 50));
    }
    assert.ok(ended > 0, `the API had no connection to end for 10 s (termination ${i + 1} of 5)`);
    await new Promise((r) => setTimeout(r, 150));
  }
  await new Promise((r) => setTimeout(r, 500));
  stop = true;
  await Promise.all(load);
  assert.equal(api.child.exitCode, null, `tgs api exited:\n${api.output()}`);
  assert.doesNotMatch(api.output(), /Unhandled 'error' event|uncaught/i);
  // it answers again: a fresh transaction and a claim succeed
  const taskId = slugid.nice();
  await client.request('queue', 'PUT', `/task/${taskId}`, taskDefinition());
  const status = await client.request<{ status: { taskId: string } }>('queue', 'GET', `/task/${taskId}/status`);
  assert.equal(status.status.taskId, taskId);
  assert.ok((statuses.get('ok') ?? 0) > 0, `answers during the test: ${JSON.stringify([...statuses])}`);
});
