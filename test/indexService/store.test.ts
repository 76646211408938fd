import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import slugid from 'slugid';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';
import { fastTask } from '../../support/graphs.js';
import { createPool, withTransaction } from '../../src/db/pool.js';
import { migrate } from '../../src/db/migrate.js';
import { pgliteUrl } from '../../src/db/pglite.js';
import { insertNewTasks } from '../../src/queue/createTasks.js';
import { validateTaskDefinition, type TaskDefinition } from '../../src/queue/definition.js';
import { expireIndex, findTask, listNamespaces, listTasks, upsertIndexedTask } from '../../src/indexService/store.js';
import { INDEX_COMPLETIONS, OUTBOX_DELETE_INDEXING } from '../../src/indexService/completions.js';
import { checkNamespace, isNamespace, splitNamespace } from '../../src/indexService/namespace.js';

// The index's store (src/indexService/store.ts) and the completion rule's statement, on real Postgres.

let db: TestDatabase;
before(async () => {
  db = await createTestDatabase();
});
after(async () => {
  await db?.drop();
});

const inDays = (n: number) => new Date(Date.now() + n * 24 * 3600 * 1000).toISOString();

/** A stored task with these routes and `extra` (as createTask stores it); its taskId. */
async function storedTask(extra: Record<string, unknown>, routes: string[], expires = inDays(30), pool = db.pool): Promise<string> {
  const taskId = slugid.nice();
  const checked = validateTaskDefinition({ ...fastTask('indexed'), routes, extra, expires }, taskId, new Date());
  if ('errors' in checked) throw new Error(checked.errors.join('; '));
  const definition: TaskDefinition = checked.definition;
  await withTransaction(pool, (client) => insertNewTasks(client, [{ taskId, definition }], { scheduleIndependent: true, dependenciesKnown: true, now: new Date() }));
  return taskId;
}

const indexCompletions = async (taskIds: string[]) => (await db.pool.query<{ written: number }>(INDEX_COMPLETIONS, [taskIds])).rows[0].written;

test('namespaces: dot-separated parts of Taskcluster\'s characters, at most 255 characters', () => {
  for (const ok of ['a', 'a.b.c', "x_y-z!~*'()%.1", 'a'.repeat(255)]) assert.ok(isNamespace(ok), ok);
  for (const bad of ['', '.', 'a.', '.a', 'a..b', 'a/b', 'a b', 'ü', 'a'.repeat(256), 'a.b\n']) assert.ok(!isNamespace(bad), JSON.stringify(bad));
  assert.throws(() => checkNamespace('a..b'), /Invalid index path "a..b": dot-separated parts/);
  assert.deepEqual(splitNamespace('a.b.c'), ['a.b', 'c']);
  assert.deepEqual(splitNamespace('top'), ['', 'top']);
});

test('the rank rule: a higher or equal rank replaces the entry, a lower one does not', async () => {
  const [a, b, c, d] = [slugid.nice(), slugid.nice(), slugid.nice(), slugid.nice()];
  const expires = inDays(1);
  assert.equal((await upsertIndexedTask(db.pool, 'rank.rule.x', { taskId: a, rank: 5, data: { n: 1 }, expires })).taskId, a);
  const kept = await upsertIndexedTask(db.pool, 'rank.rule.x', { taskId: b, rank: 4, data: { n: 2 }, expires });
  assert.deepEqual(kept, { namespace: 'rank.rule.x', taskId: a, rank: 5, data: { n: 1 }, expires: new Date(expires).toISOString() }, 'a lower rank answers the entry that stayed');
  assert.equal((await upsertIndexedTask(db.pool, 'rank.rule.x', { taskId: c, rank: 5, data: { n: 3 }, expires })).taskId, c, 'an equal rank replaces');
  assert.equal((await upsertIndexedTask(db.pool, 'rank.rule.x', { taskId: d, rank: 6.5, data: {}, expires })).taskId, d, 'a higher rank replaces');
  assert.equal((await findTask(db.pool, 'rank.rule.x'))?.taskId, d);
  assert.equal(await findTask(db.pool, 'rank.rule'), undefined, 'a namespace is not an entry');
});

test('an expired entry is not found, listed or kept in the way of a lower rank, and the sweep deletes it', async () => {
  const old = slugid.nice();
  await upsertIndexedTask(db.pool, 'expiry.gone', { taskId: old, rank: 100, data: {}, expires: new Date(Date.now() - 1000) });
  assert.equal(await findTask(db.pool, 'expiry.gone'), undefined);
  assert.deepEqual(await listTasks(db.pool, 'expiry', '', 10), []);
  const fresh = slugid.nice();
  assert.equal((await upsertIndexedTask(db.pool, 'expiry.gone', { taskId: fresh, rank: 1, data: {}, expires: inDays(1) })).taskId, fresh);
  await upsertIndexedTask(db.pool, 'expiry.other', { taskId: old, rank: 0, data: {}, expires: new Date(Date.now() - 1000) });
  await db.pool.query(`UPDATE index_namespaces SET expires = now() - interval '1 second' WHERE parent = '' AND name = 'expiry'`);
  assert.ok((await expireIndex(db.pool)) >= 1);
  const { rows } = await db.pool.query(`SELECT name FROM indexed_tasks WHERE namespace = 'expiry' ORDER BY name`);
  assert.deepEqual(rows.map((r) => r.name), ['gone'], 'the expired entry was deleted, the fresh one stays');
  assert.deepEqual(await listNamespaces(db.pool, '', 'expiry', 0), []);
  assert.ok(!(await listNamespaces(db.pool, '', '', 1000)).some((n) => n.name === 'expiry'), 'the expired namespace is gone');
});

test('listTasks and listNamespaces page by name; namespaces get the latest expiry of their entries, rounded up to midnight', async () => {
  for (let i = 0; i < 7; i++) await upsertIndexedTask(db.pool, `paging.p${i}.leaf`, { taskId: slugid.nice(), rank: 0, data: {}, expires: inDays(i + 1) });
  for (let i = 0; i < 5; i++) await upsertIndexedTask(db.pool, `paging.t${i}`, { taskId: slugid.nice(), rank: 0, data: { i }, expires: inDays(1) });
  const names: string[] = [];
  for (let after = ''; ; ) {
    const page = await listNamespaces(db.pool, 'paging', after, 3);
    names.push(...page.map((n) => n.namespace));
    if (page.length < 3) break;
    after = page[page.length - 1].name;
  }
  assert.deepEqual(names, [0, 1, 2, 3, 4, 5, 6].map((i) => `paging.p${i}`));
  const [top] = (await listNamespaces(db.pool, '', 'pagina', 1));
  assert.equal(top.namespace, 'paging');
  const latest = new Date(inDays(7));
  assert.ok(new Date(top.expires) > latest && new Date(top.expires).getUTCHours() === 0, `the root's child expires after its latest entry, at midnight: ${top.expires}`);
  await upsertIndexedTask(db.pool, 'paging.last.leaf', { taskId: slugid.nice(), rank: 0, data: {}, expires: '9999-12-31T23:59:59Z' });
  assert.deepEqual((await listNamespaces(db.pool, 'paging', 'l', 1)).map((n) => n.expires), ['9999-12-31T23:59:59.999Z'], 'the latest date-time, not year 10000');
  const tasks = await listTasks(db.pool, 'paging', 't1', 2);
  assert.deepEqual(tasks.map((t) => [t.namespace, t.data]), [['paging.t2', { i: 2 }], ['paging.t3', { i: 3 }]]);
});

test('completion: routes index.<path>, rank, data and expires from extra.index, the task\'s expires by default', async () => {
  const expires = inDays(3);
  const ranked = await storedTask({ index: { rank: 7, data: { sha: 'abc' }, expires } }, ['index.done.ranked', 'index.done.also', 'other.route']);
  const plain = await storedTask({}, ['index.done.plain'], inDays(20));
  assert.equal(await indexCompletions([ranked, plain]), 3);
  assert.deepEqual(await findTask(db.pool, 'done.ranked'), { namespace: 'done.ranked', taskId: ranked, rank: 7, data: { sha: 'abc' }, expires: new Date(expires).toISOString() });
  assert.equal((await findTask(db.pool, 'done.also'))?.taskId, ranked);
  const { expires: _expires, ...plainEntry } = (await findTask(db.pool, 'done.plain'))!;
  assert.deepEqual(plainEntry, { namespace: 'done.plain', taskId: plain, rank: 0, data: {} });
  const { rows } = await db.pool.query(`SELECT expires FROM tasks WHERE task_id = $1`, [plain]);
  assert.equal((await findTask(db.pool, 'done.plain'))!.expires, rows[0].expires.toISOString(), 'the task\'s own expires');
});

test('completion: a lower rank does not replace; of two completions of one batch at one path the higher, then the later, wins', async () => {
  const high = await storedTask({ index: { rank: 10 } }, ['index.batch.x']);
  const low = await storedTask({ index: { rank: 1 } }, ['index.batch.x']);
  await indexCompletions([high]);
  assert.equal(await indexCompletions([low]), 0);
  assert.equal((await findTask(db.pool, 'batch.x'))?.taskId, high);
  const first = await storedTask({ index: { rank: 3 } }, ['index.batch.y']);
  const second = await storedTask({ index: { rank: 3 } }, ['index.batch.y']);
  const lower = await storedTask({ index: { rank: 2 } }, ['index.batch.y']);
  assert.equal(await indexCompletions([first, second, lower]), 1, 'one entry for the path (one statement may not write a row twice)');
  assert.equal((await findTask(db.pool, 'batch.y'))?.taskId, second);
});

test('completion: odd extra.index or routes index nothing and never fail the statement', async () => {
  const odd = await Promise.all([
    storedTask({ index: { rank: 'high' } }, ['index.odd.rank']),
    storedTask({ index: { data: [1, 2] } }, ['index.odd.data']),
    storedTask({ index: { data: null } }, ['index.odd.nulldata']),
    storedTask({ index: { expires: 'next tuesday' } }, ['index.odd.expires']),
    storedTask({ index: { expires: 'infinity' } }, ['index.odd.infinity']),
    storedTask({ index: { expires: '2026-13-45T99:00:00Z' } }, ['index.odd.date']),
    storedTask({}, ['index.odd..path', 'index.', 'index.a/b']),
  ]);
  const fine = await storedTask({ index: 'not an object' }, ['index.odd.fine']);
  assert.equal(await indexCompletions([...odd, fine, slugid.nice()]), 1, 'only the task with a usable extra.index (a non-object counts as none); an unknown taskId is skipped');
  const { rows } = await db.pool.query(`SELECT namespace, name FROM indexed_tasks WHERE namespace = 'odd' OR namespace LIKE 'odd.%'`);
  assert.deepEqual(rows, [{ namespace: 'odd', name: 'fine' }]);
});

test('completion: the relay\'s delete indexes with its rows; a batch sent again (after a crash) indexes once, the same', async () => {
  const taskId = await storedTask({ index: { rank: 2, data: { v: 1 } } }, ['index.replay.a']);
  const { rows } = await db.pool.query<{ id: string }>(
    `INSERT INTO outbox (message_id, exchange, routing_key, cc, payload) VALUES ('m1', 'x', 'k', '{}', '{}') RETURNING id`,
  );
  const ids = [rows.map((r) => Number(r.id)), []];
  // the relay dies before its delete commits: neither the row's deletion nor the entry happened
  await assert.rejects(
    withTransaction(db.pool, async (client) => {
      await client.query(OUTBOX_DELETE_INDEXING, [...ids, [taskId]]);
      throw new Error('crash');
    }),
    /crash/,
  );
  assert.equal(await findTask(db.pool, 'replay.a'), undefined);
  assert.equal((await db.pool.query('SELECT count(*)::int AS n FROM outbox')).rows[0].n, 1, 'the row is still there, to be published again');
  // published again: deleted and indexed together; and once more (a replay of the same batch) changes nothing
  await db.pool.query(OUTBOX_DELETE_INDEXING, [...ids, [taskId]]);
  const entry = await findTask(db.pool, 'replay.a');
  assert.equal(entry?.taskId, taskId);
  await db.pool.query(OUTBOX_DELETE_INDEXING, [...ids, [taskId]]);
  assert.equal(await indexCompletions([taskId]), 1, 'an equal rank writes the same entry again');
  assert.deepEqual(await findTask(db.pool, 'replay.a'), entry);
  assert.equal((await db.pool.query(`SELECT count(*)::int AS n FROM indexed_tasks WHERE namespace = 'replay'`)).rows[0].n, 1);
  assert.equal((await db.pool.query('SELECT count(*)::int AS n FROM outbox')).rows[0].n, 0);
});

test('the embedded PGlite database (tgs dev) runs the same migration and statements', async (t) => {
  const dir = mkdtempSync(path.join(tmpdir(), 'tgs-index-pglite-'));
  t.after(() => rmSync(dir, { recursive: true, force: true }));
  const pool = createPool(pgliteUrl(path.join(dir, 'pglite')));
  t.after(() => pool.end());
  await migrate(pool);
  const expires = inDays(2);
  const taskId = await storedTask({ index: { rank: 2, data: { v: 1 }, expires } }, ['index.embedded.ns.a'], inDays(30), pool);
  const odd = await storedTask({ index: { expires: 'soon' } }, ['index.embedded.ns.odd'], inDays(30), pool);
  assert.equal((await pool.query<{ written: number }>(INDEX_COMPLETIONS, [[taskId, odd]])).rows[0].written, 1);
  assert.deepEqual(await findTask(pool, 'embedded.ns.a'), { namespace: 'embedded.ns.a', taskId, rank: 2, data: { v: 1 }, expires });
  assert.equal((await upsertIndexedTask(pool, 'embedded.ns.a', { taskId: slugid.nice(), rank: 1, data: {}, expires: inDays(1) })).taskId, taskId);
  assert.deepEqual((await listNamespaces(pool, 'embedded', '', 10)).map((n) => n.namespace), ['embedded.ns']);
  const { rows } = await pool.query<{ scopes: string[] }>(`SELECT scopes FROM roles WHERE role_id = 'anonymous'`);
  for (const scope of ['index:find-task:*', 'index:list-namespaces:*', 'index:list-tasks:*']) assert.ok(rows[0].scopes.includes(scope), scope);
});
