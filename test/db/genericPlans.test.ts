import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type pg from 'pg';
import { createTestDatabase, insertPendingTasks, type TestDatabase } from '../../support/db.js';
import { loadConfig } from '../../src/config.js';
import { createPool } from '../../src/db/pool.js';
import { claimPending } from '../../src/queue/claimWork.js';
import { resolveRuns } from '../../src/queue/resolveTask.js';
import { createTasks } from '../../src/queue/createTasks.js';
import { validateTaskDefinition, type TaskDefinition } from '../../src/queue/definition.js';
import { fastTask } from '../../support/graphs.js';
import slugid from 'slugid';
import { loadTasks } from '../../src/queue/taskRow.js';
import { latestRuns } from '../../src/queue/latestRuns.js';
import { readyTasks } from '../../src/queue/readiness.js';
import { testIssuer } from '../../support/issuer.js';

// The queue's hot named statements must settle on one generic plan instead of being planned again at every call
// (planning a claim cost more than executing it). Postgres compares the plans for the call's values with the
// generic one after five calls, against statistics: the tasks are analyzed first, as autovacuum would have them.

let db: TestDatabase;
const config = loadConfig({});
const issuer = testIssuer();

before(async () => {
  db = await createTestDatabase();
  await insertPendingTasks(db.pool, 2000, 'plans');
});
after(async () => {
  await db.drop();
});

/** generic_plans / custom_plans of the statements this session prepared whose text contains `fragment`. */
async function plans(client: pg.PoolClient, fragment: string) {
  const { rows } = await client.query<{ generic_plans: number; custom_plans: number }>(
    'SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE position($1 in statement) > 0',
    [fragment],
  );
  assert.ok(rows.length > 0, `no prepared statement contains ${fragment}`);
  return rows;
}

test('claims of 1 and of 4 tasks, the batch reports (in one statement, and read then written) and their read each keep one generic plan', async () => {
  const client = await db.pool.connect();
  try {
    const pool = client as unknown as pg.Pool;
    const claimed: { taskId: string; runId: number }[] = [];
    for (const [count, calls] of [[1, 12], [4, 24]]) {
      for (let i = 0; i < calls; i++) {
        const got = await claimPending(pool, config, issuer, { provisionerId: 'tgs-test', workerType: 'plans', workerGroup: 'g', workerId: 'w', count });
        assert.equal(got.length, count);
        claimed.push(...got.map((t) => ({ taskId: t.status.taskId, runId: t.runId })));
      }
    }
    const report = async (items: { taskId: string; runId: number }[]) => {
      const answers = await resolveRuns(pool, config, { note: () => undefined }, items.map((c) => ({ ...c, outcome: 'completed' as const })));
      assert.ok(answers.every((a) => 'status' in a && a.status.state === 'completed'), JSON.stringify(answers));
    };
    // distinct tasks: one statement each batch; a task named twice: the batch is read, then written
    for (let i = 0; i < 48; i += 4) await report(claimed.slice(i, i + 4));
    for (let i = 48; i < 96; i += 4) await report([claimed[i], ...claimed.slice(i, i + 4)]);
    const claims = await plans(client, 'FOR UPDATE SKIP LOCKED');
    assert.equal(claims.length, 2, 'one named claim statement per count');
    for (const p of claims) assert.ok(p.generic_plans >= 6 && p.custom_plans <= 6, `claim: ${JSON.stringify(p)}`);
    for (const fragment of ['AS v(task_id text, run_id int', 'read_runs jsonb', 'FROM tasks WHERE task_id = ANY']) {
      const [p] = await plans(client, fragment);
      assert.ok(p.generic_plans >= 6 && p.custom_plans <= 6, `${fragment}: ${JSON.stringify(p)}`);
    }
    // a large read through the same statement still returns every row, in taskId order
    const rows = await loadTasks(pool, claimed.map((c) => c.taskId));
    assert.deepEqual(rows.map((r) => r.task_id), claimed.map((c) => c.taskId).sort());
  } finally {
    client.release();
  }
});

test('createTask, one task at a time, keeps one generic plan for each of its statements', async () => {
  const client = await db.pool.connect();
  try {
    for (let i = 0; i < 12; i++) {
      const taskId = slugid.nice();
      const checked = validateTaskDefinition({ ...fastTask(`c${i}`), workerType: 'plans-create' }, taskId, new Date());
      assert.ok('definition' in checked);
      await client.query('BEGIN');
      await createTasks(client, config, [{ taskId, definition: checked.definition as TaskDefinition }]);
      await client.query('COMMIT');
    }
    for (const fragment of ['SELECT task_id FROM tasks WHERE task_id = ANY', 'INSERT INTO task_groups', 'INSERT INTO tasks (']) {
      const [p] = await plans(client, fragment);
      assert.ok(p.generic_plans >= 6 && p.custom_plans <= 6, `${fragment}: ${JSON.stringify(p)}`);
    }
  } finally {
    client.release();
  }
});

test('the bridge\'s check of stored runs and the dispatch\'s readiness read, for 1 to 4 tasks a call, keep one generic plan each', async () => {
  const client = await db.pool.connect();
  try {
    const pool = client as unknown as pg.Pool;
    const ids = (await pool.query<{ task_id: string }>("SELECT task_id FROM tasks WHERE worker_type = 'plans' ORDER BY task_id LIMIT 4")).rows.map((r) => r.task_id);
    // a chain's hop asks about one task; a flush or a dispatch of a wider graph about a few
    for (let i = 0; i < 24; i++) {
      const some = ids.slice(0, 1 + (i % 4));
      assert.equal((await latestRuns(pool, some)).length, some.length);
      assert.equal((await readyTasks(pool, some)).size, some.length, 'tasks without dependencies are ready');
    }
    for (const fragment of ["runs->-1->>'reasonResolved' AS reason", 'CROSS JOIN LATERAL']) {
      const [p] = await plans(client, fragment);
      assert.ok(p.generic_plans >= 12 && p.custom_plans <= 6, `${fragment}: ${JSON.stringify(p)}`);
    }
  } finally {
    client.release();
  }
});

test('a claim count outside 1-32 is refused before any statement is made for it', async () => {
  for (const count of [0, 33, 1.5]) {
    await assert.rejects(claimPending(db.pool, config, issuer, { provisionerId: 'tgs-test', workerType: 'plans', workerGroup: 'g', workerId: 'w', count }), RangeError);
  }
});

test('a pool asked for generic plans plans every statement without its values (the relay\'s)', async () => {
  const generic = createPool(db.url, 1, { genericPlans: true });
  try {
    const { rows } = await generic.query<{ plan_cache_mode: string; jit: string }>('SELECT current_setting($1) AS plan_cache_mode, current_setting($2) AS jit', ['plan_cache_mode', 'jit']);
    assert.deepEqual(rows[0], { plan_cache_mode: 'force_generic_plan', jit: 'off' });
  } finally {
    await generic.end();
  }
  const { rows } = await db.pool.query<{ mode: string }>("SELECT current_setting('plan_cache_mode') AS mode");
  assert.equal(rows[0].mode, 'auto');
});
