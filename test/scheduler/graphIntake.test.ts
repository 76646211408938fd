import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import hawk from 'hawk';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask, graphOf } from '../../support/graphs.js';
import { objectMembers } from '../../src/api/jsonObjectStream.js';
import { createTaskGraph } from '../../src/scheduler/createTaskGraph.js';
import { graphHash } from '../../src/canonicalJson.js';
import { GraphIntake, INTAKE_CHUNK, readGraphBody } from '../../src/scheduler/graphIntake.js';
import { TASK_BODY_LIMIT } from '../../src/api/bodyLimits.js';
import { databaseCounts } from '../helpers/dbState.js';
import { DEFERRED_COLUMNS } from '../../src/relay/outboxStore.js';

// The streamed intake: nodes validated and written in chunks as the body arrives. No Temporal here (a create
// through the API stores the graph and then answers 503); the direct calls cover what is stored.
let t: TestApi;
before(async () => {
  t = await startTestApi({ temporalAddress: '127.0.0.1:1' });
});
after(async () => {
  await t.close();
});

/** The body text in pieces of `size` bytes, as a socket would deliver it. */
async function* pieces(text: string, size = 4096) {
  const bytes = Buffer.from(text);
  for (let i = 0; i < bytes.length; i += size) yield bytes.subarray(i, i + size);
}

const streamed = (text: string) => objectMembers(pieces(text), { expand: ['tasks'], maxValueBytes: TASK_BODY_LIMIT });
/** A create, its answer's pages of tasks read into one list. */
async function create(id: string, text: string) {
  const result = await createTaskGraph({ config: t.config, pool: t.db.pool }, id, streamed(text));
  const tasks: { label: string; taskId: string }[] = [];
  for await (const page of result.tasks) tasks.push(...page);
  return { ...result, tasks };
}

/** `n` nodes, each requiring the next one (defined later in the body) and naming another by `$subs`. */
function forwardChain(n: number) {
  const tasks: Record<string, unknown> = {};
  for (let i = 0; i < n; i++) {
    tasks[`n${i}`] = { requires: i + 1 < n ? [`n${i + 1}`] : [], task: fastTask(`n${i}`, ['completed'], { ref: { $subs: `taskId:n${(i + n / 2) % n}` } }) };
  }
  return tasks;
}

test('a graph larger than a chunk, naming labels before they are defined, with its routing after its tasks, is stored whole', async () => {
  const n = INTAKE_CHUNK * 2 + 500;
  const id = slugid.nice();
  const text = JSON.stringify({ tasks: forwardChain(n), metadata: { name: 'streamed' }, routing: 'late' });
  const result = await create(id, text);
  assert.equal(result.created, true);
  const taskIdOf = new Map(result.tasks.map((x) => [x.label, x.taskId]));
  const { rows: nodes } = await t.db.pool.query<{ idx: number; label: string; task_id: string; requires: number[] }>(
    'SELECT idx, label, task_id, requires FROM graph_nodes WHERE task_graph_id = $1 ORDER BY idx',
    [id],
  );
  assert.deepEqual(result.tasks.map((x) => x.label), nodes.map((r) => r.label), 'answered in the order a read gives');
  assert.deepEqual([...taskIdOf.keys()].sort(), Array.from({ length: n }, (_, i) => `n${i}`).sort());
  assert.deepEqual(nodes.map((r) => r.idx), Array.from({ length: n }, (_, i) => i), 'no gaps');
  const labelAt = new Map(nodes.map((r) => [r.idx, r.label]));
  for (const node of nodes) {
    const i = Number(node.label.slice(1));
    assert.equal(node.task_id, taskIdOf.get(node.label));
    assert.deepEqual(node.requires.map((r) => labelAt.get(r)), i + 1 < n ? [`n${i + 1}`] : []);
  }
  const { rows: tasks } = await t.db.pool.query<{ task_id: string; definition: { routing: string; dependencies: string[]; payload: { ref: string } } }>(
    'SELECT task_id, definition FROM tasks WHERE task_group_id = $1',
    [id],
  );
  assert.equal(tasks.length, n);
  const labelOf = new Map(result.tasks.map((x) => [x.taskId, x.label]));
  for (const task of tasks) {
    const i = Number((labelOf.get(task.task_id) as string).slice(1));
    assert.equal(task.definition.routing, 'late._');
    assert.deepEqual(task.definition.dependencies, i + 1 < n ? [taskIdOf.get(`n${i + 1}`)] : []);
    assert.equal(task.definition.payload.ref, taskIdOf.get(`n${(i + n / 2) % n}`));
  }
  const { rows: messages } = await t.db.pool.query<{ routing: string; message_id: string }>(
    `SELECT payload->'row'->>'routing' AS routing, message_id FROM (SELECT ${DEFERRED_COLUMNS} FROM outbox_deferred) d
     WHERE render = 'task-defined' AND payload->'row'->>'task_group_id' = $1`,
    [id],
  );
  assert.equal(messages.length, n, 'one task-defined message a task');
  assert.ok(messages.every((m) => m.routing === 'late._'), 'messages carry the routing that came after the tasks');
  const { rows: graphs } = await t.db.pool.query('SELECT routing, metadata, node_count, task_count, graph_hash FROM task_graphs WHERE task_graph_id = $1', [id]);
  assert.equal(graphs[0].routing, 'late');
  assert.deepEqual(graphs[0].metadata, { name: 'streamed' });
  assert.equal(graphs[0].node_count, n);
  assert.equal(graphs[0].task_count, n);
  assert.match(graphs[0].graph_hash, /^v2:[0-9a-f]{64}$/);
});

test('a problem found after chunks were written rolls the whole graph back, naming every offending label', async () => {
  const n = INTAKE_CHUNK * 2 + 10;
  const tasks = forwardChain(n);
  (tasks[`n${n - 1}`] as { requires: string[] }).requires = ['nowhere'];
  (tasks[`n${n - 2}`] as { task: { priority: string } }).task.priority = 'urgent';
  // rows only: the chunks' task-defined messages drew ids from outbox_deferred's sequence, which a rollback does not
  // give back (Postgres' sequences are not transactional)
  const before = await databaseCounts(t.db.pool, { sequences: false });
  await assert.rejects(create(slugid.nice(), JSON.stringify({ routing: 'r', tasks })), (err: { code: string; message: string; details: { labels: string[] } }) => {
    assert.equal(err.code, 'InputValidationError');
    assert.deepEqual(err.details.labels, [`n${n - 2}`, `n${n - 1}`]);
    assert.match(err.message, /requires unknown label "nowhere"/);
    return true;
  });
  const cycle = forwardChain(n);
  (cycle[`n${n - 1}`] as { requires: string[] }).requires = ['n0'];
  await assert.rejects(create(slugid.nice(), JSON.stringify({ tasks: cycle })), /is on a dependency cycle/);
  const truncated = JSON.stringify({ tasks: forwardChain(n) }).slice(0, -5000);
  await assert.rejects(create(slugid.nice(), truncated), (err: { code: string }) => err.code === 'InputError');
  assert.deepEqual(await databaseCounts(t.db.pool, { sequences: false }), before, 'nothing written');
});

test('a chunk is written while the next is read, one write at a time, and a refusal waits for the write in flight', async () => {
  const n = INTAKE_CHUNK * 3 + 10;
  const node = JSON.stringify({ task: fastTask('a') });
  // the second `tasks` member is refused once the first one's chunks are read: the last write is still running then
  const text = `{"tasks": ${JSON.stringify(forwardChain(n))}, "tasks": {"b": ${node}}}`;
  const intake = new GraphIntake({ config: t.config, taskGraphId: slugid.nice(), startIdx: 0, now: new Date() });
  let inFlight = 0;
  let maxInFlight = 0;
  let readDuringWrite = 0;
  let writesEnded = 0;
  const writeChunk = async () => {
    // as flush does: the chunk is taken at once, the writing takes a while
    intake.dropPending();
    const countAtStart = intake.count;
    maxInFlight = Math.max(maxInFlight, ++inFlight);
    await new Promise((resolve) => setTimeout(resolve, 50));
    if (intake.count > countAtStart) readDuringWrite++;
    inFlight--;
    writesEnded++;
  };
  await assert.rejects(readGraphBody(streamed(text), intake, () => slugid.nice(), writeChunk, () => undefined), (err: Error) => {
    assert.match(err.message, /body has `tasks` twice/);
    assert.equal(inFlight, 0, 'the refusal waited for the write in flight');
    return true;
  });
  assert.equal(writesEnded, 3);
  assert.equal(maxInFlight, 1);
  assert.ok(readDuringWrite >= 2, `nodes were read while a chunk was written (${readDuringWrite} of 3 writes)`);
});

test('a body received whole is read in turns of the event loop while a chunk is written, so the write goes on meanwhile', async () => {
  // The pieces of an async generator reach the intake as microtasks: without turns of the event loop, a write that
  // needs a few of them (a statement larger than the socket's buffer) would only end once the next chunk is read.
  const n = INTAKE_CHUNK * 3 + 10;
  const text = JSON.stringify({ tasks: forwardChain(n) });
  const intake = new GraphIntake({ config: t.config, taskGraphId: slugid.nice(), startIdx: 0, now: new Date() });
  const nextChunkReadAtEnd: boolean[] = [];
  const writeChunk = async () => {
    intake.dropPending();
    for (let turn = 0; turn < 3; turn++) await new Promise((resolve) => setImmediate(resolve));
    nextChunkReadAtEnd.push(intake.chunkReady);
  };
  await readGraphBody(streamed(text), intake, () => slugid.nice(), writeChunk, () => undefined);
  // the first two writes each have a whole chunk read after them; the third only the last 10 nodes
  assert.deepEqual(nextChunkReadAtEnd.slice(0, 2), [false, false]);
});

test('the same graph again, its members and nodes in another order, is idempotent; a different one is a 409', async () => {
  const id = slugid.nice();
  const graph = graphOf({ a: {}, b: { requires: ['a'] }, c: { requires: ['a', 'b'] } });
  const first = await create(id, JSON.stringify(graph));
  const reordered = { tasks: Object.fromEntries(Object.entries(graph.tasks).reverse()), routing: graph.routing };
  const again = await create(id, JSON.stringify(reordered));
  assert.equal(again.created, false);
  assert.deepEqual(new Map(again.tasks.map((x) => [x.label, x.taskId])), new Map(first.tasks.map((x) => [x.label, x.taskId])));
  const changed = graphOf({ a: {}, b: { requires: ['a'] }, c: { requires: ['a'] } });
  await assert.rejects(create(id, JSON.stringify(changed)), (err: { code: string }) => err.code === 'RequestConflict');
});

test('a graph stored with a whole-graph hash (before the streamed intake) is still idempotent', async () => {
  const id = slugid.nice();
  const graph = graphOf({ a: {}, b: { requires: ['a'] } });
  const first = await create(id, JSON.stringify(graph));
  const validated = { ...graph, scopes: [], metadata: {}, tags: {} };
  await t.db.pool.query('UPDATE task_graphs SET graph_hash = $2 WHERE task_graph_id = $1', [id, graphHash(validated)]);
  const again = await create(id, JSON.stringify(graph));
  assert.equal(again.created, false);
  assert.deepEqual(again.tasks, first.tasks);
  await assert.rejects(create(id, JSON.stringify(graphOf({ a: {} }))), (err: { code: string }) => err.code === 'RequestConflict');
});

test('a label given twice, or a member given twice, is refused', async () => {
  const node = JSON.stringify({ task: fastTask('a') });
  const before = await databaseCounts(t.db.pool);
  await assert.rejects(create(slugid.nice(), `{"tasks": {"a": ${node}, "a": ${node}}}`), /label appears twice in tasks/);
  await assert.rejects(create(slugid.nice(), `{"routing": "x", "tasks": {"a": ${node}}, "routing": "y"}`), /body has "routing" twice/);
  assert.deepEqual(await databaseCounts(t.db.pool), before);
});

test('through the API: a Hawk payload hash is checked against the streamed body before anything is committed', async () => {
  const text = JSON.stringify(graphOf(Object.fromEntries(Array.from({ length: INTAKE_CHUNK + 100 }, (_, i) => [`t${i}`, {}]))));
  const put = async (id: string, signedPayload: string) => {
    const url = `${t.rootUrl}/api/scheduler/v1/task-graph/${id}`;
    const { header } = hawk.client.header(url, 'PUT', {
      credentials: { id: t.root.clientId, key: t.root.accessToken, algorithm: 'sha256' },
      payload: signedPayload,
      contentType: 'application/json',
    });
    const res = await fetch(url, { method: 'PUT', headers: { authorization: header, 'content-type': 'application/json' }, body: text });
    return { status: res.status, body: (await res.json()) as { code: string; message: string } };
  };
  // rows only: the chunks written before the hash was checked drew outbox_deferred ids, which a rollback does not give back
  const before = await databaseCounts(t.db.pool, { sequences: false });
  const forged = await put(slugid.nice(), text.replace('"t0"', '"T0"'));
  assert.equal(forged.status, 401);
  assert.match(forged.body.message, /does not match the payload hash/);
  assert.deepEqual(await databaseCounts(t.db.pool, { sequences: false }), before, 'nothing written');
  // signed right: stored, then 503 only because this test has no Temporal to start the workflow
  const signed = await put(slugid.nice(), text);
  assert.equal(signed.status, 503, JSON.stringify(signed.body));
  assert.equal(Number((await databaseCounts(t.db.pool)).tasks), Number(before.tasks) + INTAKE_CHUNK + 100);
});

test('through the API: a body refused part-way is answered, not reset, while the client is still sending', async () => {
  const tasks = forwardChain(INTAKE_CHUNK * 3);
  (tasks.n5 as { task: { priority: string } }).task.priority = 'urgent';
  const res = await t.request('PUT', `/api/scheduler/v1/task-graph/${slugid.nice()}`, JSON.stringify({ tasks }));
  assert.equal(res.status, 400);
  assert.deepEqual(res.body.details.labels, ['n5']);
  const tooLarge = await t.request('PUT', `/api/scheduler/v1/task-graph/${slugid.nice()}`, `{"tasks": {"a": {"task": {"payload": "${'x'.repeat(TASK_BODY_LIMIT)}"}}}}`);
  assert.equal(tooLarge.status, 413);
  assert.equal(tooLarge.body.code, 'InputTooLarge');
});

test('an envelope member refused before the tasks stops the intake before a node is read', async () => {
  async function* source() {
    yield Buffer.from('{"metadata": {"name": "x"}, "routing": "not valid!", "tasks": {');
    throw new Error('read past the envelope');
  }
  const members = objectMembers(source(), { expand: ['tasks'], maxValueBytes: TASK_BODY_LIMIT });
  await assert.rejects(createTaskGraph({ config: t.config, pool: t.db.pool }, slugid.nice(), members), (err: { code: string; message: string }) => {
    assert.equal(err.code, 'InputValidationError');
    assert.match(err.message, /routing/);
    return true;
  });
});

test('a requires list naming a label twice is refused, "__proto__" included', async () => {
  const before = await databaseCounts(t.db.pool);
  for (const twice of ['a', '__proto__']) {
    const tasks = { [twice]: { task: fastTask(twice) }, b: { requires: [twice, twice], task: fastTask('b') } };
    await assert.rejects(create(slugid.nice(), JSON.stringify({ tasks })), /- b: .*(requires names a label more than once|must NOT have duplicate items)/);
  }
  assert.deepEqual(await databaseCounts(t.db.pool), before);
});
