import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type pg from 'pg';
import { createTestDatabase, insertPendingTasks, type TestDatabase } from '../../support/db.js';
import { loadConfig } from '../../src/config.js';
import { claimPending, claimStatement } from '../../src/queue/claimWork.js';
import { resolveRuns } from '../../src/queue/resolveTask.js';
import { ANNOUNCE_GROUPS_SQL, DONE_GROUPS_SQL, UNANNOUNCED_DONE_GROUPS_SQL } from '../../src/queue/taskGroups.js';
import { CURSOR_READ, OUTBOX_DELETE } from '../../src/relay/outboxStore.js';
import { EXPIRED_TASKS_DELETE } from '../../src/queue/sweeps.js';
import { createPool } from '../../src/db/pool.js';
import { DISPATCH_MEMBERS_SQL, GRAPH_MEMBERS_SQL, GRAPHS_HEARING_SQL } from '../../src/scheduler/graphStore.js';
import { ENCODED_NODES_SQL, setUpNodesRead } from '../../src/scheduler/graphReads.js';
import { testIssuer } from '../../support/issuer.js';

// A queue table's statistics describe the moment autovacuum last analyzed it. Here it is analyzed drained (3,000
// tasks of three worker pools, every one completed), then a backlog arrives in one pool: the statistics say no task
// is pending or unresolved. The claim and the task-group checks must still walk their partial indexes (migration 019)
// instead of scanning whichever index looks smallest: each statement's generic plan (the one a named statement keeps)
// is read from EXPLAIN. The outbox, near empty whenever it is analyzed, is read by the relay through its index all the
// same; a graph stored since the last analyze is read by taskId, and its nodes in one pass over its group.

let db: TestDatabase;
const config = loadConfig({});
const issuer = testIssuer();
const BACKLOG = 2000;

before(async () => {
  db = await createTestDatabase();
  for (const workerType of ['stale', 'other', 'third']) {
    for (let i = 0; i < 10; i++) await insertPendingTasks(db.pool, 100, workerType, { analyze: false });
    for (;;) {
      const got = await claimPending(db.pool, config, issuer, { provisionerId: 'tgs-test', workerType, workerGroup: 'g', workerId: 'w', count: 32 });
      if (got.length === 0) break;
      await resolveRuns(db.pool, config, { note: () => undefined }, got.map((t) => ({ taskId: t.status.taskId, runId: t.runId, outcome: 'completed' as const })));
    }
  }
  await db.pool.query('VACUUM ANALYZE tasks, task_groups');
  for (let i = 0; i < BACKLOG / 100; i++) await insertPendingTasks(db.pool, 100, 'stale', { analyze: false });
});
after(async () => {
  await db.drop();
});

/**
 * The generic plan of `sql` with these arguments (parameters of type `types`, text by default) in a session of
 * `pool`; `analyze`: run it (rolled back) for its buffers.
 */
async function genericPlan(sql: string, args: string[], options: { analyze?: boolean; pool?: pg.Pool; types?: string[] } = {}): Promise<string> {
  const { analyze = false, pool = db.pool } = options;
  const client: pg.PoolClient = await pool.connect();
  try {
    await client.query('BEGIN');
    await client.query('SET LOCAL plan_cache_mode = force_generic_plan');
    const params = (sql.match(/\$\d+/g) ?? []).reduce((n, p) => Math.max(n, Number(p.slice(1))), 0);
    const types = options.types ?? Array(params).fill('text');
    await client.query(`PREPARE planned(${types.join(', ')}) AS ${sql}`);
    const literals = args.map((a) => `'${a.replace(/'/g, "''")}'`).join(', ');
    const { rows } = await client.query(`EXPLAIN (COSTS OFF${analyze ? ', ANALYZE, BUFFERS, TIMING OFF' : ''}) EXECUTE planned(${literals})`);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  } finally {
    await client.query('ROLLBACK');
    await client.query('DEALLOCATE planned');
    client.release();
  }
}

test('the statistics are stale: the planner expects about no pending task while 2,000 wait', async () => {
  const { rows } = await db.pool.query(`EXPLAIN SELECT 1 FROM tasks WHERE state = 'pending'`);
  const estimated = Number(/rows=(\d+)/.exec(rows[0]['QUERY PLAN'])?.[1]);
  assert.ok(estimated < 10, `estimated ${estimated} pending rows`);
  const actual = await db.pool.query(`SELECT count(*)::int AS n FROM tasks WHERE state = 'pending'`);
  assert.equal(actual.rows[0].n, BACKLOG);
});

test('a claim walks the pending index in claim order, whatever the backlog: no sort, a few dozen buffers', async () => {
  const claimArgs = ['tgs-test', 'stale', 'g', 'w', new Date(Date.now() + 60_000).toISOString(), new Date().toISOString()];
  const plan = await genericPlan(claimStatement(8), claimArgs);
  assert.match(plan, /Index Scan using tasks_pending on tasks/, plan);
  assert.doesNotMatch(plan, /Sort/, plan);
  const run = await genericPlan(claimStatement(8), claimArgs, { analyze: true });
  const picked = run.slice(run.indexOf('CTE picked'), run.indexOf('CTE claimed'));
  const buffers = Number(/Buffers: shared hit=(\d+)/.exec(picked)?.[1]);
  assert.ok(buffers < 100, `the pick of 8 read ${buffers} buffers:\n${run}`);
});

test('the task-group checks probe the unresolved-tasks index once per group', async () => {
  for (const sql of [DONE_GROUPS_SQL, ANNOUNCE_GROUPS_SQL]) {
    const plan = await genericPlan(sql.replace('ANY($1)', 'ANY($1::text[])'), ['{a,b,c}']);
    assert.match(plan, /Index (Only )?Scan using tasks_group_unresolved on tasks t\n\s+Index Cond: \(task_group_id = g\.task_group_id\)/, plan);
    assert.doesNotMatch(plan, /Join Filter|tasks_deadline/, plan);
  }
  const sweep = await genericPlan(UNANNOUNCED_DONE_GROUPS_SQL.replace('LIMIT $1', 'LIMIT $1::int'), ['500']);
  assert.match(sweep, /tasks_group_unresolved/, sweep);
  assert.doesNotMatch(sweep, /Join Filter|tasks_deadline/, sweep);
});

test('the relay reads and deletes outbox rows through its index after planning them on the empty outbox', async () => {
  // The outbox as the relay leaves it after a busy hour (50,000 messages published and deleted), vacuumed and
  // analyzed empty. Each session plans its statements now, then a backlog of 5,000 messages arrives, and the plans
  // the sessions keep are read.
  await db.pool.query(`INSERT INTO outbox (message_id, exchange, routing_key, payload) SELECT 'old' || n, 'x', 'k', '{}' FROM generate_series(1, 50000) AS n`);
  await db.pool.query('DELETE FROM outbox');
  await db.pool.query('VACUUM ANALYZE outbox');
  const relayPool = createPool(db.url, 1, { genericPlans: true, indexScansOnly: true });
  const sessions = { plain: await db.pool.connect(), relay: await relayPool.connect() };
  const explain = async (client: pg.PoolClient, statement: string) =>
    (await client.query(`EXPLAIN (COSTS OFF) EXECUTE ${statement}`)).rows.map((r) => r['QUERY PLAN']).join('\n');
  try {
    for (const client of Object.values(sessions)) {
      await client.query('SET plan_cache_mode = force_generic_plan');
      await client.query(`PREPARE outbox_read(bigint, bigint, bigint[], bigint[]) AS ${CURSOR_READ}`);
      await client.query(`PREPARE outbox_delete(bigint[], bigint[]) AS ${OUTBOX_DELETE}`);
      await explain(client, `outbox_read(0, 10, '{}', '{}')`);
      await explain(client, `outbox_delete('{1,2}', '{}')`);
    }
    await db.pool.query(`INSERT INTO outbox (message_id, exchange, routing_key, payload) SELECT 'm' || n, 'x', 'k', '{}' FROM generate_series(1, 5000) AS n`);
    const plain = await explain(sessions.plain, `outbox_read(0, 10, '{}', '{}')`);
    assert.match(plain, /Seq Scan on outbox(?!_id_seq)/, plain);
    const read = await explain(sessions.relay, `outbox_read(0, 10, '{}', '{}')`);
    assert.doesNotMatch(read, /Seq Scan on outbox(?!_id_seq)/, read);
    assert.match(read, /Index Scan using outbox_pkey on outbox\n\s+Index Cond: \(\(id > \$1\) AND \(id <= \$2\)\)/, read);
    const deleted = await explain(sessions.relay, `outbox_delete('{1,2}', '{}')`);
    assert.match(deleted, /Index Scan using outbox_pkey on outbox/, deleted);
  } finally {
    for (const client of Object.values(sessions)) {
      await client.query('DEALLOCATE outbox_read');
      await client.query('DEALLOCATE outbox_delete');
      client.release();
    }
    await relayPool.end();
  }
});

test("a graph stored since graph_nodes was analyzed is probed by taskId, not read whole, at each dispatch", async () => {
  // 50 graphs of 200 nodes analyzed, then a graph of 20,000 nodes whose dispatches ask about 175 tasks at a time
  await db.pool.query(`INSERT INTO task_graphs (task_graph_id, scheduler_id) SELECT 'small' || g, 's' FROM generate_series(1, 50) AS g`);
  await db.pool.query(`INSERT INTO graph_nodes (task_graph_id, idx, task_id, member, label)
    SELECT 'small' || g, n, 'small' || g || '-' || n, true, 'l' || n FROM generate_series(1, 50) AS g, generate_series(0, 199) AS n`);
  await db.pool.query('ANALYZE graph_nodes');
  await db.pool.query(`INSERT INTO task_graphs (task_graph_id, scheduler_id) VALUES ('big', 's')`);
  await db.pool.query(`INSERT INTO graph_nodes (task_graph_id, idx, task_id, member, label)
    SELECT 'big', n, 'big-' || n, true, 'l' || n FROM generate_series(0, 19999) AS n`);
  const ids = `ARRAY[${Array.from({ length: 175 }, (_, i) => `'big-${i * 100}'`).join(', ')}]`;
  const client = await db.pool.connect();
  // the members a cancel acts on, and the members a dispatch schedules with whether each is a cached node
  try {
    for (const [name, sql] of [['members', GRAPH_MEMBERS_SQL], ['dispatch_members', DISPATCH_MEMBERS_SQL]]) {
      try {
        // as a named statement runs: planned for its values at first, then generic if that looks no worse
        await client.query(`PREPARE ${name}(text, text[]) AS ${sql}`);
        for (let i = 0; i < 6; i++) assert.equal((await client.query(`EXECUTE ${name}('big', ${ids})`)).rows.length, 175);
        const plan = (await client.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) EXECUTE ${name}('big', ${ids})`)).rows.map((r) => r['QUERY PLAN']).join('\n');
        assert.match(plan, /(Index Scan using|Index Only Scan using|Bitmap Index Scan on) graph_nodes_by_task/, `${name}: ${plan}`);
        const buffers = Number(/Buffers: shared hit=(\d+)/.exec(plan)?.[1]);
        assert.ok(buffers < 175 * 6, `${name}: ${buffers} buffers for 175 members:\n${plan}`);
      } finally {
        await client.query(`DEALLOCATE ${name}`);
      }
    }
  } finally {
    client.release();
  }
});

test("the graphs hearing a flush's resolutions are found by taskId, not by reading a graph stored since graph_nodes was analyzed", async () => {
  // its own database: graph_nodes analyzed empty, then a live graph of 20,000 nodes stored and vacuumed (not
  // analyzed), and the bridge asks which live graphs have 175 of its tasks as nodes
  const fresh = await createTestDatabase();
  const client = await fresh.pool.connect();
  try {
    await client.query('VACUUM ANALYZE task_graphs, graph_nodes');
    await client.query(`INSERT INTO task_graphs (task_graph_id, scheduler_id) VALUES ('big', 's')`);
    await client.query(`INSERT INTO graph_nodes (task_graph_id, idx, task_id, member, label) SELECT 'big', n, 'big-' || n, true, 'l' || n FROM generate_series(0, 19999) AS n`);
    await client.query('VACUUM graph_nodes');
    const ids = `ARRAY[${Array.from({ length: 175 }, (_, i) => `'big-${i * 100}'`).join(', ')}]`;
    // the plan a named statement settles on after its first five calls: the generic one
    await client.query('SET plan_cache_mode = force_generic_plan');
    await client.query(`PREPARE hearing(text[]) AS ${GRAPHS_HEARING_SQL}`);
    assert.equal((await client.query(`EXECUTE hearing(${ids})`)).rows.length, 175);
    const plan = (await client.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) EXECUTE hearing(${ids})`)).rows.map((r) => r['QUERY PLAN']).join('\n');
    assert.match(plan, /(Index Scan using|Index Only Scan using|Bitmap Index Scan on) graph_nodes_by_task/, plan);
    // the plan to avoid reads the graph's 20,000 index entries (few buffers) and tests each against the 175 taskIds
    assert.doesNotMatch(plan, /Rows Removed by Filter/, plan);
  } finally {
    client.release();
    await fresh.drop();
  }
});

test('a graph stored since tasks was analyzed has its nodes read in one pass over its group, not one per node', async () => {
  const NODES = 3000;
  const taskIds = await insertPendingTasks(db.pool, NODES, 'nodes', { analyze: false });
  const { rows } = await db.pool.query<{ task_group_id: string }>('SELECT task_group_id FROM tasks WHERE task_id = $1', [taskIds[0]]);
  const group = rows[0].task_group_id;
  await db.pool.query(`INSERT INTO task_graphs (task_graph_id, scheduler_id, node_count, task_count) VALUES ($1, 's', $2, $2)`, [group, NODES]);
  await db.pool.query(
    `INSERT INTO graph_nodes (task_graph_id, idx, task_id, member, label) SELECT $1, (row_number() OVER ()) - 1, task_id, true, task_id FROM tasks WHERE task_group_id = $1`,
    [group],
  );
  const client = await db.pool.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await setUpNodesRead(client, NODES);
    const plan = (await client.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) ${ENCODED_NODES_SQL}`, [group, 0, Date.now()])).rows
      .map((r) => r['QUERY PLAN'])
      .join('\n');
    const buffers = Number(/Buffers: shared hit=(\d+)/.exec(plan)?.[1]);
    assert.ok(buffers < NODES * 5, `${buffers} buffers for ${NODES} nodes:\n${plan}`);
  } finally {
    await client.query('ROLLBACK');
    client.release();
  }
});

test('the expiry sweep finds expired tasks through the expires index when tasks was analyzed near empty', async () => {
  // its own database: `tasks` analyzed with no row, then 3,000 tasks arrive, none of them expired
  const fresh = await createTestDatabase();
  try {
    await fresh.pool.query('VACUUM ANALYZE tasks');
    await insertPendingTasks(fresh.pool, 3000, 'expiry', { analyze: false });
    const client = await fresh.pool.connect();
    try {
      await client.query('BEGIN');
      const plan = (await client.query(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF, TIMING OFF) ${EXPIRED_TASKS_DELETE}`)).rows.map((r) => r['QUERY PLAN']).join('\n');
      assert.match(plan, /Index Scan using tasks_expires on tasks/, plan);
      const buffers = Number(/Buffers: shared hit=(\d+)/.exec(plan)?.[1] ?? 0) + Number(/read=(\d+)/.exec(plan)?.[1] ?? 0);
      assert.ok(buffers < 20, `the sweep read ${buffers} buffers to find no expired task among 3,000:\n${plan}`);
    } finally {
      await client.query('ROLLBACK');
      client.release();
    }
  } finally {
    await fresh.drop();
  }
});
