import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import pg from 'pg';
import slugid from 'slugid';
import { eventually } from '../../support/stack.js';
import { fastTask } from '../../support/graphs.js';
import { TgsClient } from '../../src/client/tgsClient.js';
import { openGraphFile } from '../../src/scheduler/graphFile.js';
import { useStack } from '../helpers/stackFixture.js';

/*
 * GET /api/scheduler/v1/task-graph/<id>/file (docs/formats.md § Amend): the graph's current file, each member node as
 * submitted, extended or last amended (graph_nodes.source, migration 041), on the real stack. Tasks go to a worker pool
 * nobody claims: the graphs stay running and their nodes as they were written.
 */
const stack = useStack();
const POOL = 'file-nobody';

type Node = { requires?: string[]; reruns?: number; task: Record<string, unknown> };
const node = (label: string, extra: Partial<Node> = {}, payload: Record<string, unknown> = {}): Node => ({
  ...extra,
  task: { ...fastTask(label, ['completed'], payload), workerType: POOL },
});

interface GraphFileAnswer {
  taskGraphId: string;
  tasks: Record<string, Node>;
  missing: string[];
}

async function submit(tasks: Record<string, Node>) {
  const taskGraphId = slugid.nice();
  const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, { routing: 'files', tasks });
  return { taskGraphId, ids: new Map(res.tasks.map((t) => [t.label, t.taskId])) };
}
const file = (taskGraphId: string) => stack.root.request<GraphFileAnswer>('scheduler', 'GET', `/task-graph/${taskGraphId}/file`);
const amend = (taskGraphId: string, tasks: Record<string, unknown>, dryRun = false) =>
  stack.root.request<{ classification: Record<string, string[] | number> }>('scheduler', 'PUT', `/task-graph/${taskGraphId}/amend${dryRun ? '?dryRun=true' : ''}`, { tasks });
/** The graph's member labels in node order, as the nodes endpoint gives them. */
async function memberLabels(taskGraphId: string): Promise<string[]> {
  const nodes = await stack.root.request<{ members: string; labels: string[] }>('scheduler', 'GET', `/task-graph/${taskGraphId}/nodes`);
  return nodes.labels.filter((_, i) => nodes.members[i] === '1');
}

test('the file gives back each node as submitted, defaults filled, `$subs` kept, in node order, with readable key order; amended with it unchanged, every label is unchanged', async () => {
  const tasks: Record<string, Node> = {
    fetch: node('fetch'),
    build: node('build', { requires: ['fetch'], reruns: 2 }, { source: { $subs: 'taskId:fetch' } }),
    // given without requires or reruns: the file has the schema's defaults
    lint: { task: node('lint').task },
  };
  const g = await submit(tasks);
  const answer = await file(g.taskGraphId);
  assert.equal(answer.taskGraphId, g.taskGraphId);
  assert.deepEqual(answer.missing, []);
  assert.deepEqual(Object.keys(answer.tasks), await memberLabels(g.taskGraphId), 'labels in node order');
  assert.deepEqual(answer.tasks.fetch, { requires: [], reruns: 0, ...tasks.fetch });
  assert.deepEqual(answer.tasks.build, tasks.build);
  assert.deepEqual((answer.tasks.build.task.payload as Record<string, unknown>).source, { $subs: 'taskId:fetch' }, 'the $subs, not the taskId it became');
  assert.deepEqual(answer.tasks.lint, { requires: [], reruns: 0, task: tasks.lint.task });
  // Postgres keeps jsonb keys shortest first; the file orders them as people write them
  assert.deepEqual(Object.keys(answer.tasks.build), ['requires', 'reruns', 'task']);
  assert.deepEqual(Object.keys(answer.tasks.build.task), ['provisionerId', 'workerType', 'created', 'deadline', 'payload', 'metadata']);
  assert.deepEqual(Object.keys(answer.tasks.build.task.metadata as object), ['description', 'name', 'owner', 'source']);
  // the client reads the same
  const client = new TgsClient({ rootUrl: stack.api.rootUrl, credentials: stack.api.root });
  assert.deepEqual(await client.graphFile(g.taskGraphId), answer);

  const same = await amend(g.taskGraphId, answer.tasks, true);
  assert.deepEqual(same.classification, { changed: [], metadata: [], added: [], dependent: [], removed: [], unchanged: 3 });
});

test('the file follows extend and amend: new nodes, a metadata patch, a changed node, an added and a removed label', async () => {
  const g = await submit({ a: node('a'), b: node('b', { requires: ['a'] }), c: node('c') });
  await stack.root.request('scheduler', 'POST', `/task-graph/${g.taskGraphId}/extend`, { tasks: { d: node('d', { requires: ['b'] }) } });
  const extended = await file(g.taskGraphId);
  assert.deepEqual(Object.keys(extended.tasks), ['a', 'b', 'c', 'd']);
  assert.deepEqual(extended.tasks.d.requires, ['b']);

  const edited = structuredClone(extended.tasks) as Record<string, Node>;
  edited.a.task.priority = 'high'; // metadata only: patched in place
  (edited.c.task.payload as Record<string, unknown>).step = 'changed'; // a new task for c
  delete edited.d; // removed
  edited.e = node('e', { requires: ['c'] }); // added
  const res = await amend(g.taskGraphId, edited);
  assert.deepEqual(res.classification, { changed: ['c'], metadata: ['a'], added: ['e'], dependent: [], removed: ['d'], unchanged: 1 });

  const after = await file(g.taskGraphId);
  assert.deepEqual(Object.keys(after.tasks), await memberLabels(g.taskGraphId));
  assert.deepEqual(Object.keys(after.tasks).sort(), ['a', 'b', 'c', 'e']);
  assert.equal(after.tasks.a.task.priority, 'high', 'the patched node is the file it was patched from');
  assert.deepEqual(after.tasks.c.task.payload, { outcomes: ['completed'], step: 'changed' }, 'the changed label is its new node');
  assert.deepEqual(after.tasks.e, { reruns: 0, ...edited.e });
  assert.deepEqual(after.missing, []);
  // the current file amended again changes nothing
  const again = await amend(g.taskGraphId, after.tasks, true);
  assert.deepEqual(again.classification, { changed: [], metadata: [], added: [], dependent: [], removed: [], unchanged: 4 });
});

test('more nodes than a page are all given, in node order; a reader that stops early leaves no transaction open', async () => {
  const tasks: Record<string, Node> = {};
  for (let i = 0; i < 2_300; i++) tasks[`n${i}`] = node(`n${i}`, i > 0 ? { requires: [`n${Math.floor(i / 2)}`] } : {});
  const g = await submit(tasks);
  const answer = await file(g.taskGraphId);
  assert.equal(Object.keys(answer.tasks).length, 2_300);
  assert.deepEqual(Object.keys(answer.tasks), await memberLabels(g.taskGraphId));
  assert.deepEqual(answer.tasks.n1999.requires, ['n999']);

  // a reader that stops after the first page: the transaction ends and its connection goes back to the pool (a pool of
  // one connection: its next query runs on that connection, each statement its own transaction again)
  const pool = new pg.Pool({ connectionString: stack.api.db.url, max: 1 });
  try {
    const text = await openGraphFile(pool, g.taskGraphId);
    const first = await text.next();
    assert.match(first.value as string, /^\{"taskGraphId":/);
    assert.equal(pool.idleCount, 0, 'the file holds the connection while it is read');
    await text.return(undefined);
    assert.equal(pool.idleCount, 1);
    const { rows } = await pool.query<{ outside: boolean }>('SELECT now() = statement_timestamp() AS outside');
    assert.equal(rows[0].outside, true, 'no transaction left open on the connection');
  } finally {
    await pool.end();
  }
});

test('nodes stored before migration 041 are named in `missing`; an unknown graph is 404, a malformed id 400, a queue-level group 409', async () => {
  const g = await submit({ old: node('old'), kept: node('kept', { requires: ['old'] }) });
  await stack.api.db.pool.query("UPDATE graph_nodes SET source = NULL WHERE task_graph_id = $1 AND label = 'old'", [g.taskGraphId]);
  const answer = await file(g.taskGraphId);
  assert.deepEqual(answer.missing, ['old']);
  assert.deepEqual(Object.keys(answer.tasks), ['kept']);

  const unknown = await stack.api.request('GET', `/api/scheduler/v1/task-graph/${slugid.nice()}/file`);
  assert.equal(unknown.status, 404);
  assert.equal(unknown.body.code, 'ResourceNotFound');
  const notAnId = await stack.api.request('GET', '/api/scheduler/v1/task-graph/..%2F..%2Fetc/file');
  assert.equal(notAnId.status, 400);
  assert.equal(notAnId.body.code, 'InputError');

  // a task group with queue-level dependencies becomes a graph of origin `queue`: it has no file
  const groupId = slugid.nice();
  const first = slugid.nice();
  const inGroup = (name: string, extra: Record<string, unknown> = {}) => ({ ...fastTask(name), workerType: POOL, taskGroupId: groupId, ...extra });
  await stack.root.request('queue', 'PUT', `/task/${first}`, inGroup('first'));
  await stack.root.request('queue', 'PUT', `/task/${slugid.nice()}`, inGroup('second', { dependencies: [first] }));
  await eventually(async () => (await stack.api.db.pool.query("SELECT 1 FROM task_graphs WHERE task_graph_id = $1 AND origin = 'queue'", [groupId])).rows.length === 1, 'the group is a graph', 30_000);
  const queueGroup = await stack.api.request('GET', `/api/scheduler/v1/task-graph/${groupId}/file`);
  assert.equal(queueGroup.status, 409);
  assert.equal(queueGroup.body.code, 'RequestConflict');
  assert.match(queueGroup.body.message, /queue-level dependencies: it has no graph file/);
});

test('without scheduler:get-task-graph:<id> the file is refused with 403, anonymous or signed', async () => {
  const g = await submit({ secret: node('secret') });
  const role = await stack.root.request<{ description: string; scopes: string[] }>('auth', 'GET', '/roles/anonymous');
  const clientId = `tests/file-${randomBytes(4).toString('hex')}`;
  const created = await stack.root.request('auth', 'PUT', `/clients/${encodeURIComponent(clientId)}`, {
    description: 'graph file test: reads another graph only',
    expires: new Date(Date.now() + 3_600_000).toISOString(),
    scopes: [`scheduler:get-task-graph:${slugid.nice()}`],
  });
  // the anonymous role grants every graph's reads by default (migration 023): taken away for this test
  await stack.root.request('auth', 'POST', '/roles/anonymous', { description: role.description, scopes: role.scopes.filter((s) => !s.startsWith('scheduler:get-task-graph:')) });
  try {
    for (const credentials of [null, { clientId, accessToken: created.accessToken as string }]) {
      const res = await stack.api.request('GET', `/api/scheduler/v1/task-graph/${g.taskGraphId}/file`, undefined, credentials);
      assert.equal(res.status, 403, JSON.stringify(res.body));
      assert.equal(res.body.code, 'InsufficientScopes');
      assert.match(res.body.message, new RegExp(`scheduler:get-task-graph:${g.taskGraphId}`));
      assert.equal(res.body.tasks, undefined, 'no part of the file');
    }
  } finally {
    await stack.root.request('auth', 'POST', '/roles/anonymous', { description: role.description, scopes: role.scopes });
  }
  assert.deepEqual(Object.keys((await file(g.taskGraphId)).tasks), ['secret']);
});
