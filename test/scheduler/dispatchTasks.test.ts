import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import pg from 'pg';
import slugid from 'slugid';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';
import { graphOf } from '../../support/graphs.js';
import { testIssuer } from '../../support/issuer.js';
import { loadConfig } from '../../src/config.js';
import { createPool } from '../../src/db/pool.js';
import { createActivities } from '../../src/activities/index.js';
import { dispatchInOne } from '../../src/activities/dispatchInOne.js';
import { OUTBOX_CHANNEL } from '../../src/exchanges/outbox.js';
import { claimPending } from '../../src/queue/claimWork.js';
import { cancelTasks as cancelQueueTasks } from '../../src/queue/cancelTasks.js';
import { taskMessage } from '../../src/queue/messages.js';
import { PENDING_CHANNEL } from '../../src/queue/notify.js';
import { resolveRun } from '../../src/queue/resolveTask.js';
import { loadTasks } from '../../src/queue/taskRow.js';
import { outboxMessage } from '../../src/relay/outboxMessage.js';
import { OUTBOX_COLUMNS, type OutboxRow } from '../../src/relay/outboxStore.js';
import { createTaskGraph } from '../../src/scheduler/createTaskGraph.js';
import { recordGraphState } from '../../src/scheduler/graphStore.js';
import { upsertIndexedTask } from '../../src/indexService/store.js';
import { cacheRow } from '../../src/taskCache/store.js';
import { cachePath } from '../../src/taskCache/tiers.js';
import { graphHop } from '../../src/observability/metrics.js';
import type { DispatchItem } from '../../src/workflows/graphModel.js';

// The dispatch activity has two paths: a batch of schedules alone in one statement (src/activities/dispatchInOne.ts),
// and the general one (a transaction: members, readiness, the cache, the schedule, reruns) for everything else. Both
// must leave the same rows, write the same messages, wake the same listeners and answer the workflow the same; each
// test runs both and checks which one ran.

let db: TestDatabase;
const config = loadConfig({});
const issuer = testIssuer();
let listener: pg.Client;
const notifications: { channel: string; payload: string }[] = [];

before(async () => {
  db = await createTestDatabase();
  listener = new pg.Client({ connectionString: db.url });
  await listener.connect();
  listener.on('notification', (n) => notifications.push({ channel: n.channel, payload: n.payload ?? '' }));
  await listener.query(`LISTEN ${OUTBOX_CHANNEL}; LISTEN ${PENDING_CHANNEL}`);
});
after(async () => {
  await listener.end();
  await db.drop();
});

const PATHS = ['general', 'one statement'] as const;
type Path = (typeof PATHS)[number];

/**
 * The activities on a view of the pool that counts what each dispatch did: the general path opens a transaction
 * (pool.connect), the one statement is a query whose text starts with its `members` CTE.
 */
function activitiesCounting() {
  const counts = { transactions: 0, oneStatements: 0 };
  const pool = {
    query: (...args: Parameters<pg.Pool['query']>) => {
      const text = typeof args[0] === 'string' ? args[0] : (args[0] as pg.QueryConfig).text;
      if (text.startsWith('WITH members AS')) counts.oneStatements++;
      return (db.pool.query as (...a: unknown[]) => unknown)(...args);
    },
    connect: () => {
      counts.transactions++;
      return db.pool.connect();
    },
  } as unknown as pg.Pool;
  const activities = createActivities({ config, pool });
  /** Dispatches `items` by the path asked, and checks that it was that one. */
  const dispatch = async (path: Path, taskGraphId: string, items: DispatchItem[]) => {
    const before = { ...counts };
    // The general path for the same schedules: a rerun item of a member whose latest run is not the one named
    // (as a retried rerun finds it) changes nothing, and only a batch without reruns goes in one statement.
    const asked: DispatchItem[] = path === 'general' ? [...items, { idx: 0, taskId: items[0].taskId, kind: 'rerun', expectedRunId: 99 }] : items;
    const result = await activities.dispatchTasks(taskGraphId, asked);
    assert.deepEqual(
      { transactions: counts.transactions - before.transactions, oneStatements: counts.oneStatements - before.oneStatements },
      path === 'general' ? { transactions: 1, oneStatements: 0 } : { transactions: 0, oneStatements: 1 },
      `dispatched by the ${path} path`,
    );
    return result;
  };
  return { activities, dispatch, counts };
}

/** A stored graph (no workflow) with its tasks on `workerType`, each with a route and a tag: label → taskId. */
async function storeGraph(workerType: string, nodes: Parameters<typeof graphOf>[0], extra: (label: string) => Record<string, unknown> = () => ({})) {
  const taskGraphId = slugid.nice();
  const graph = graphOf(nodes);
  for (const [label, node] of Object.entries(graph.tasks)) {
    Object.assign(node.task, { workerType, routes: [`index.dispatch.${label}`], tags: { label } });
    Object.assign(node, extra(label));
  }
  const created = await createTaskGraph({ config, pool: db.pool }, taskGraphId, graph);
  const ids = new Map<string, string>();
  for await (const page of created.tasks) for (const t of page) ids.set(t.label, t.taskId);
  return { taskGraphId, workerType, ids, id: (label: string) => ids.get(label) as string };
}

const schedule = (...taskIds: string[]): DispatchItem[] => taskIds.map((taskId, idx) => ({ idx, taskId, kind: 'schedule' }));

/** Claims `taskId` (pending on `workerType`) and reports its run 0 `outcome`. */
async function run(workerType: string, taskId: string, outcome: 'completed' | 'failed' = 'completed') {
  const claimed = await claimPending(db.pool, config, issuer, { provisionerId: 'tgs-test', workerType, workerGroup: 'g', workerId: 'w', count: 1 });
  assert.deepEqual(claimed.map((c) => c.status.taskId), [taskId]);
  await resolveRun(db.pool, config, { note: () => undefined }, taskId, 0, outcome);
}

type StoredGraph = Awaited<ReturnType<typeof storeGraph>>;

type Dispatch = ReturnType<typeof activitiesCounting>['dispatch'];

/**
 * A stored graph of `root` and the nodes of `dependents`, on a worker type of its own named after `name` and `path`,
 * whose root was dispatched by `path` and ran to `outcome`.
 */
async function rootRan(dispatch: Dispatch, path: Path, name: string, outcome: 'completed' | 'failed' = 'completed', dependents: Parameters<typeof graphOf>[0] = { next: { requires: ['root'] } }) {
  const workerType = `d-${name}-${path === 'general' ? 'g' : 'o'}`;
  const graph = await storeGraph(workerType, { root: {}, ...dependents });
  await dispatch(path, graph.taskGraphId, schedule(graph.id('root')));
  await run(workerType, graph.id('root'), outcome);
  return graph;
}

/** The graph's task rows and outbox rows as JSON, its ids and worker type by placeholders and every time by `T`. */
async function stored(graph: StoredGraph) {
  const ids = [...graph.ids.values()];
  const tasks = await db.pool.query('SELECT task_id, state, runs, retries_left, taken_until, pending_since FROM tasks WHERE task_id = ANY($1) ORDER BY task_id', [ids]);
  const outbox = await db.pool.query<OutboxRow>(`SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE split_part(message_id, '/', 1) = ANY($1) ORDER BY id`, [ids]);
  // the rows the relay renders, rendered as it publishes them
  const messages = outbox.rows.map((row) => outboxMessage(config, row));
  // in the order of their labels (taskIds are random), each task's messages in the order written
  const byTask = <T extends Record<string, unknown>>(rows: T[], key: (row: T) => string) => [...rows].sort((a, b) => key(a).localeCompare(key(b)));
  return {
    tasks: byTask(labelled(graph, tasks.rows) as { task_id: string }[], (r) => r.task_id),
    messages: byTask(labelled(graph, messages) as { messageId: string; exchange: string }[], (m) => m.messageId.split('/')[0]),
  };
}

/** `value` as JSON, the graph's taskIds replaced by their labels, its id and worker type by placeholders, every time by `T`. */
function labelled(graph: StoredGraph, value: unknown): unknown {
  let text = JSON.stringify(value).replace(/\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)/g, 'T');
  for (const [label, taskId] of graph.ids) text = text.replaceAll(taskId, `<${label}>`);
  text = text.replaceAll(graph.taskGraphId, '<graph>').replaceAll(graph.workerType, '<workerType>');
  return JSON.parse(text);
}

const sortedResolutions = (r: { resolutions: { taskId: string }[] }) => [...r.resolutions].sort((a, b) => a.taskId.localeCompare(b.taskId));

/** The notifications that arrived since `from`, once the listener has had a moment to read them. */
async function notifiedSince(from: number) {
  await new Promise((resolve) => setTimeout(resolve, 100));
  return notifications.slice(from).map((n) => `${n.channel}:${n.payload}`).sort();
}

test('contract: both paths schedule the ready members alike (rows, runs, rendered messages, notifications, answer), and refuse the rest as unready', async () => {
  const { dispatch } = activitiesCounting();
  // `waiting` also requires `other`, which never runs
  const dependents = { other: {}, next: { requires: ['root'] }, alsoNext: { requires: ['root'] }, waiting: { requires: ['root', 'other'] } };
  const answers: Record<Path, unknown> = {} as Record<Path, unknown>;
  const rows: Record<Path, unknown> = {} as Record<Path, unknown>;
  const woken: Record<Path, string[]> = {} as Record<Path, string[]>;
  const foreign = await storeGraph('d-foreign', { a: {}, b: { requires: ['a'] } });
  for (const path of PATHS) {
    const graph = await rootRan(dispatch, path, 'contract', 'completed', dependents);
    await notifiedSince(0); // the report's own wake-up of the relay, sent after it answered
    const from = notifications.length;
    const startedAt = Date.now();
    // the dependents, one not ready, a member already resolved, and another graph's task (not a member)
    const answer = await dispatch(path, graph.taskGraphId, schedule(graph.id('next'), graph.id('alsoNext'), graph.id('waiting'), foreign.id('b'), graph.id('root')));
    woken[path] = await notifiedSince(from);
    answers[path] = labelled(graph, labelled(foreign, { ...answer, resolutions: sortedResolutions(answer) }));
    rows[path] = await stored(graph);
    // what the one statement writes is what the queue's JavaScript builds for the same change
    const tasks = await loadTasks(db.pool, [graph.id('next'), graph.id('alsoNext')]);
    for (const task of tasks) {
      assert.equal(task.state, 'pending');
      const scheduled = Date.parse(task.runs[0].scheduled);
      assert.ok(scheduled >= startedAt - 5 && scheduled <= Date.now() + 5, task.runs[0].scheduled);
    }
    const { rows: outbox } = await db.pool.query<OutboxRow>(`SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE split_part(message_id, '/', 1) = ANY($1) ORDER BY id`, [tasks.map((t) => t.task_id)]);
    assert.equal(outbox.length, 2);
    for (const row of outbox) {
      const task = tasks.find((t) => row.message_id.startsWith(`${t.task_id}/`));
      assert.ok(task);
      const expected = taskMessage(config, 'task-pending', task, 0);
      assert.deepEqual(outboxMessage(config, row), { ...expected, cc: expected.cc ?? [] });
    }
  }
  assert.deepEqual(answers['one statement'], answers.general);
  assert.deepEqual(answers.general, {
    resolutions: [{ taskId: '<root>', runId: 0, state: 'completed', reasonResolved: 'completed' }],
    unready: ['<waiting>', '<b>'],
  });
  assert.deepEqual(rows['one statement'], rows.general, 'the same rows and messages');
  assert.deepEqual(woken.general, [`${OUTBOX_CHANNEL}:`, `${PENDING_CHANNEL}:tgs-test/d-contract-g`]);
  assert.deepEqual(woken['one statement'], [`${OUTBOX_CHANNEL}:`, `${PENDING_CHANNEL}:tgs-test/d-contract-o`]);
});

test('a member whose dependency failed (all-completed), or that does not exist: unready, and nothing is written, by both paths', async () => {
  const { dispatch } = activitiesCounting();
  for (const path of PATHS) {
    const graph = await rootRan(dispatch, path, 'failed', 'failed');
    const before = await stored(graph);
    const missing = slugid.nice();
    const answer = await dispatch(path, graph.taskGraphId, schedule(graph.id('next'), missing));
    assert.deepEqual(answer, { resolutions: [], unready: [graph.id('next'), missing] });
    assert.deepEqual(await stored(graph), before);
  }
});

test('a canceled graph\'s tasks are not scheduled: their cancel is reported back, by both paths', async () => {
  const { activities, dispatch } = activitiesCounting();
  for (const path of PATHS) {
    const graph = await rootRan(dispatch, path, 'canceled');
    // as the workflow cancels: its unresolved members, then the graph's state
    await activities.cancelTasks(graph.taskGraphId, [graph.id('next')]);
    await recordGraphState(db.pool, graph.taskGraphId, 'canceled', [], 'test');
    const before = await stored(graph);
    const answer = await dispatch(path, graph.taskGraphId, schedule(graph.id('next')));
    assert.deepEqual(answer, { resolutions: [{ taskId: graph.id('next'), runId: 0, state: 'exception', reasonResolved: 'canceled' }] });
    assert.deepEqual(await stored(graph), before, 'no run, no message');
  }
});

test('a cancel holding the task when the dispatch comes: the dispatch waits for it and leaves the task canceled, by both paths', async () => {
  const { dispatch } = activitiesCounting();
  for (const path of PATHS) {
    const graph = await rootRan(dispatch, path, 'race');
    const canceling = await db.pool.connect();
    try {
      await canceling.query('BEGIN');
      await cancelQueueTasks(canceling, config, [graph.id('next')]);
      const dispatched = dispatch(path, graph.taskGraphId, schedule(graph.id('next')));
      // the dispatch is blocked on the task's row lock before the cancel commits
      for (let i = 0; ; i++) {
        const { rows } = await db.pool.query("SELECT 1 FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'");
        if (rows.length > 0) break;
        assert.ok(i < 200, 'the dispatch never waited for the cancel\'s lock');
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
      await canceling.query('COMMIT');
      const answer = await dispatched;
      assert.equal(answer.unready, undefined, 'it was ready: the cancel, not readiness, kept it from being scheduled');
    } finally {
      canceling.release();
    }
    const [task] = await loadTasks(db.pool, [graph.id('next')]);
    assert.equal(task.state, 'exception');
    assert.deepEqual(task.runs.map((r) => [r.runId, r.state, r.reasonResolved]), [[0, 'exception', 'canceled']], 'no pending run after the cancel');
    const { messages } = await stored(graph);
    assert.deepEqual(
      messages.map((m) => `${m.messageId.split('/')[0]} ${m.exchange.split('/').at(-1)}`),
      ['<next> task-exception', '<root> task-pending', '<root> task-running', '<root> task-completed'],
      'next\'s cancel and no task-pending for it',
    );
  }
});

test('a retried dispatch schedules nothing more and answers the same; the one statement observes each hop once', async () => {
  const { dispatch } = activitiesCounting();
  for (const path of PATHS) {
    const graph = await rootRan(dispatch, path, 'retry', 'completed', { a: { requires: ['root'] }, b: { requires: ['root'] } });
    const hops = async () => (await graphHop.get()).values.find((v) => v.metricName === 'tgs_graph_hop_seconds_count')?.value ?? 0;
    const hopsBefore = await hops();
    const first = await dispatch(path, graph.taskGraphId, schedule(graph.id('a'), graph.id('b')));
    assert.equal((await hops()) - hopsBefore, 2, 'a hop observed for each task made pending');
    const after = await stored(graph);
    const again = await dispatch(path, graph.taskGraphId, schedule(graph.id('a'), graph.id('b')));
    assert.deepEqual(again, first);
    assert.deepEqual(first, { resolutions: [] });
    assert.deepEqual(await stored(graph), after, 'no second run, no second message');
    // the general path counts an already-pending first run as made pending again; the one statement only what it changed
    if (path === 'one statement') assert.equal((await hops()) - hopsBefore, 2, 'the retry observes no hop');
  }
});

test('a ready cached node takes the general path: its cache hit resolves it, nothing schedules it first; a cached node not yet ready does not need it', async () => {
  const { dispatch, activities, counts } = activitiesCounting();
  const workerType = 'd-cached';
  const graph = await storeGraph(workerType, { root: {}, next: { requires: ['root'] } }, (label) => ({ cache: { name: `dispatch-${label}-${slugid.nice()}` } }));
  assert.deepEqual(await dispatch('one statement', graph.taskGraphId, schedule(graph.id('next'))), { resolutions: [], unready: [graph.id('next')] });
  // a completed task indexed at root's cache key: root's lookup hits it
  const source = await storeGraph(workerType, { source: {} });
  await dispatch('one statement', source.taskGraphId, schedule(source.id('source')));
  await run(workerType, source.id('source'));
  const cache = await cacheRow(db.pool, graph.id('root'));
  assert.ok(cache);
  await upsertIndexedTask(db.pool, cachePath(cache.tier, cache.name, cache.key), { taskId: source.id('source'), rank: 0, data: {}, expires: new Date(Date.now() + 86_400_000) });

  const before = { ...counts };
  const answer = await activities.dispatchTasks(graph.taskGraphId, schedule(graph.id('root')));
  assert.deepEqual(
    { transactions: counts.transactions - before.transactions, oneStatements: counts.oneStatements - before.oneStatements },
    { transactions: 1, oneStatements: 1 },
    'the statement found the cached node, and the general path dispatched it',
  );
  assert.deepEqual(answer.resolutions.map((r) => [r.taskId, r.runId, r.state]), [[graph.id('root'), 0, 'completed']]);
  const [root] = await loadTasks(db.pool, [graph.id('root')]);
  assert.equal(root.state, 'completed');
  assert.deepEqual(root.runs.map((r) => [r.runId, r.reasonCreated, r.cachedFrom?.taskId]), [[0, 'scheduled', source.id('source')]], 'one run, the hit\'s: never scheduled');
  const { messages } = await stored(graph);
  assert.deepEqual(messages.map((m) => m.exchange.split('/').at(-1)), ['task-completed'], 'no task-pending');
});

test('the one statement keeps one generic plan for batches of 1 to 4 tasks', async () => {
  const graph = await storeGraph('dispatch-plans', Object.fromEntries(Array.from({ length: 40 }, (_, i) => [`t${i}`, {}])));
  await db.pool.query('ANALYZE');
  const ids = [...graph.ids.values()];
  // one session, so that its prepared statement can be read; the notifications wait their turn on it
  const session = createPool(db.url, 1);
  try {
    for (let i = 0; i < 24; i++) {
      const some = ids.slice(i, i + 1 + (i % 4));
      const done = await dispatchInOne(session, graph.taskGraphId, some);
      assert.equal(done?.ready.size, some.length, 'roots are ready');
    }
    const { rows } = await session.query<{ generic_plans: number; custom_plans: number }>(
      "SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE statement LIKE 'WITH members AS%'",
    );
    assert.equal(rows.length, 1);
    assert.ok(rows[0].generic_plans >= 12 && rows[0].custom_plans <= 6, JSON.stringify(rows[0]));
  } finally {
    await session.end();
  }
});
