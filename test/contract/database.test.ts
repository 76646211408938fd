import { describe, test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import slugid from 'slugid';
import type pg from 'pg';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { renderedOutbox } from '../helpers/outbox.js';
import { loadMigrations } from '../../src/db/migrate.js';
import { withTransaction } from '../../src/db/pool.js';
import { pgliteUrl } from '../../src/db/pglite.js';
import { WorkerStream } from '../../src/client/workerStream.js';
import { eventually } from '../../support/stack.js';

// One suite, two databases: a real Postgres test database and the embedded PGlite of `tgs dev` without
// DATABASE_URL, both behind the unchanged queue code (the API of startTestApi, its pool, its claim waiter).
const implementations: { name: string; setup(): { databaseUrl?: string; cleanup(): void } }[] = [
  { name: 'Postgres', setup: () => ({ cleanup: () => undefined }) },
  {
    name: 'PGlite',
    setup: () => {
      const dir = mkdtempSync(path.join(tmpdir(), 'tgs-contract-pglite-'));
      return { databaseUrl: pgliteUrl(path.join(dir, 'pglite')), cleanup: () => rmSync(dir, { recursive: true, force: true }) };
    },
  },
];

for (const impl of implementations) {
  describe(`database contract: ${impl.name}`, () => {
    let t: TestApi;
    let pool: pg.Pool;
    let cleanup = () => undefined as void;
    const prefix = `contract-db-${slugid.nice().slice(0, 6)}/`;

    before(async () => {
      const s = impl.setup();
      cleanup = s.cleanup;
      t = await startTestApi({ exchangePrefix: prefix, claimWorkWaitMs: 20_000, ...(s.databaseUrl ? { databaseUrl: s.databaseUrl } : {}) });
      // The API's own pool: on PGlite it is the embedded database, not startTestApi's Postgres one.
      pool = t.api.deps.pool;
    });
    after(async () => {
      await t.close();
      cleanup();
    });

    const q = (method: string, p: string, body?: unknown, creds?: Parameters<TestApi['request']>[3]) => t.request(method, `/api/queue/v1${p}`, body, creds);
    const create = async (workerType: string) => {
      const taskId = slugid.nice();
      const res = await q('PUT', `/task/${taskId}`, { ...fastTask('contract'), workerType });
      assert.equal(res.status, 200, JSON.stringify(res.body));
      return taskId;
    };
    const claim = (workerType: string, workerId: string, tasks = 1) =>
      q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'grp', workerId, tasks });

    test('every migration is applied', async () => {
      const { rows } = await pool.query<{ id: number; name: string }>('SELECT id, name FROM tgs_migrations ORDER BY id');
      assert.deepEqual(rows.map((r) => r.name), (await loadMigrations()).map((m) => m.name));
      const tables = await pool.query<{ n: number }>(
        `SELECT count(*) AS n FROM information_schema.tables WHERE table_name IN ('tasks', 'outbox', 'task_graphs', 'graph_nodes', 'clients')`,
      );
      assert.equal(tables.rows[0].n, 5);
    });

    test('createTask → a long-polling claimWork woken by NOTIFY → reportCompleted → the task-completed outbox row', async () => {
      const workerType = 'contract-lp';
      const before = t.api.deps.claimWaiter.generation(`tgs-test/${workerType}`);
      // The claim waits (20 s long-poll) on an empty queue while the task is created over HTTP.
      const claiming = claim(workerType, 'w1');
      const taskId = await create(workerType);
      const claimed = await claiming;
      assert.equal(claimed.status, 200, JSON.stringify(claimed.body));
      assert.deepEqual(claimed.body.tasks.map((c: { status: { taskId: string } }) => c.status.taskId), [taskId]);
      assert.ok(t.api.deps.claimWaiter.generation(`tgs-test/${workerType}`) > before, 'the pending notification reached the claim waiter');

      const [c] = claimed.body.tasks;
      const done = await q('POST', `/task/${taskId}/runs/0/completed`, undefined, c.credentials);
      assert.equal(done.status, 200, JSON.stringify(done.body));
      assert.equal(done.body.status.state, 'completed');

      const rows = (await renderedOutbox(pool, t.config)).filter((m) => m.routingKey.startsWith(`${taskId}.`));
      assert.deepEqual(rows.map((r) => r.exchange.slice(prefix.length)), ['queue/v1/task-defined', 'queue/v1/task-pending', 'queue/v1/task-running', 'queue/v1/task-completed']);
      const running = rows[2];
      assert.equal(running.routingKey, `${taskId}.0.grp.w1.tgs-test.${workerType}.-.${taskId}._`);
      assert.equal((running.payload as { status: { state: string } }).status.state, 'running');
      const completed = rows[3];
      assert.equal(completed.routingKey, `${taskId}.0.grp.w1.tgs-test.${workerType}.-.${taskId}._`);
      assert.equal((completed.payload as { status: { state: string } }).status.state, 'completed');
      assert.ok(completed.messageId, 'a messageId for the exchange message');
      assert.equal(new Set(rows.map((r) => r.messageId)).size, 4);
    });

    test('a cancel reaches the worker stream holding the run: the NOTIFY on the claim waiter\'s session, the canceled frame', async () => {
      const taskId = await create('contract-cancel');
      const claims: string[] = [];
      const canceled: string[] = [];
      const stream = new WorkerStream({
        rootUrl: t.rootUrl,
        credentials: t.root,
        provisionerId: 'tgs-test',
        workerType: 'contract-cancel',
        workerGroup: 'grp',
        workerId: 'streamer',
        capacity: 1,
        onClaim: (c) => claims.push(c.status.taskId),
        onCanceled: (r) => canceled.push(`${r.taskId}/${r.runId}/${r.reasonResolved}`),
        log: () => undefined,
      });
      try {
        await eventually(async () => claims.includes(taskId), 'claimed over the stream');
        assert.equal((await q('POST', `/task/${taskId}/cancel`)).status, 200);
        await eventually(async () => canceled.length > 0, 'the canceled frame');
        assert.deepEqual(canceled, [`${taskId}/0/canceled`]);
      } finally {
        await stream.close();
      }
    });

    test('concurrent claimers: every task is claimed exactly once', async () => {
      const workerType = 'contract-many';
      const ids = new Set<string>();
      for (let i = 0; i < 6; i++) ids.add(await create(workerType));
      const answers = await Promise.all(Array.from({ length: 6 }, (_, i) => claim(workerType, `w${i}`, 1)));
      const claimedIds = answers.flatMap((a) => {
        assert.equal(a.status, 200);
        return a.body.tasks.map((c: { status: { taskId: string } }) => c.status.taskId);
      });
      assert.deepEqual([...claimedIds].sort(), [...ids].sort());
    });

    test('a transaction never sees (or rolls back) another caller’s work, and a rollback leaves the next caller outside it', async () => {
      await pool.query('CREATE TABLE IF NOT EXISTS contract_probe (name text PRIMARY KEY)');
      let inside!: () => void;
      const started = new Promise<void>((resolve) => (inside = resolve));
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const failing = withTransaction(pool, async (client) => {
        await client.query(`INSERT INTO contract_probe VALUES ('from-the-rolled-back-transaction')`);
        inside();
        await gate;
        throw new Error('roll back');
      });
      await started;
      // Another caller writes while the transaction is open: it must commit on its own.
      const other = pool.query(`INSERT INTO contract_probe VALUES ('from-another-caller')`);
      release();
      await assert.rejects(failing, /roll back/);
      await other;
      const { rows } = await pool.query<{ name: string }>('SELECT name FROM contract_probe ORDER BY name');
      assert.deepEqual(rows.map((r) => r.name), ['from-another-caller']);
      // Multi-statement simple queries and a failing statement leave the session usable and not in a transaction.
      await assert.rejects(pool.query('SELECT * FROM no_such_table'), /no_such_table/);
      await pool.query(`INSERT INTO contract_probe VALUES ('a'); INSERT INTO contract_probe VALUES ('b')`);
      const after = await pool.query<{ n: number }>('SELECT count(*) AS n FROM contract_probe');
      assert.equal(after.rows[0].n, 3);
    });
  });
}
