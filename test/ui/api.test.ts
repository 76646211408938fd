import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { eventually } from '../../support/stack.js';
import { fastTask, graphOf, layeredGraph } from '../../support/graphs.js';
import { startTestApi } from '../../support/api.js';
import { useStack } from '../helpers/stackFixture.js';

// The scheduler endpoints the graph explorer reads: the graphs list, the compact nodes answer and the
// changes long-poll (cursor semantics included), against the real stack.

const stack = useStack({ worker: true });

interface Changes {
  cursor: string;
  status: { state: string };
  nodeCount: number;
  timeBase: number;
  blockedBy: string[];
  graphChanged: boolean;
  amends: number;
  changes: { taskIds: string; states: string; runs: number[]; started: (number | null)[]; resolved: (number | null)[] };
}

/** The graph's tasks on a worker pool nobody claims but the test. */
function manualGraph(nodes: Parameters<typeof graphOf>[0], workerType: string) {
  const graph = graphOf(nodes);
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = workerType;
  return graph;
}

async function submit(graph: ReturnType<typeof graphOf>) {
  const taskGraphId = slugid.nice();
  const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graph);
  return { taskGraphId, ids: new Map(res.tasks.map((t) => [t.label, t.taskId])) };
}

const status = async (id: string) => (await stack.root.request('scheduler', 'GET', `/task-graph/${id}/status`)).status.state as string;
const waitState = (id: string, state: string) => eventually(async () => (await status(id)) === state, `graph ${id} ${state}`, 60_000);
const changes = (id: string, since?: string, wait = 0) =>
  stack.root.request<Changes>('scheduler', 'GET', `/task-graph/${id}/changes?wait=${wait}${since ? `&since=${encodeURIComponent(since)}` : ''}`);

/** The state character of each task in a changes answer. */
function changedStates(answer: Changes): Map<string, string> {
  const out = new Map<string, string>();
  for (let k = 0; k < answer.changes.states.length; k++) out.set(answer.changes.taskIds.slice(22 * k, 22 * k + 22), answer.changes.states[k]);
  return out;
}

async function claim(workerType: string) {
  const res = await stack.root.request('queue', 'POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'tests', workerId: 'ui', tasks: 1 });
  return res.tasks[0] as { status: { taskId: string }; runId: number; credentials: { clientId: string; accessToken: string; certificate: string } };
}

test('the graphs list: newest first, counts by task state, filtered by state, paged without gaps or repeats', async () => {
  const finished = await submit(graphOf({ a: {}, b: { requires: ['a'] } }));
  await waitState(finished.taskGraphId, 'finished');
  const blocked = await submit(graphOf({ broken: { outcomes: ['failed'] }, after: { requires: ['broken'] } }));
  await waitState(blocked.taskGraphId, 'blocked');
  const running = await submit(manualGraph({ waiting: {}, next: { requires: ['waiting'] } }, 'list'));
  await eventually(async () => (await stack.root.request('scheduler', 'GET', `/task-graph/${running.taskGraphId}/nodes`)).states === 'pu', 'waiting pending');

  const all = await stack.root.request('scheduler', 'GET', '/task-graphs');
  const ids = all.taskGraphs.map((g: { status: { taskGraphId: string } }) => g.status.taskGraphId);
  assert.deepEqual(ids.slice(0, 3), [running.taskGraphId, blocked.taskGraphId, finished.taskGraphId], 'newest first');
  const byId = new Map(all.taskGraphs.map((g: { status: { taskGraphId: string } }) => [g.status.taskGraphId, g]));
  const b = byId.get(blocked.taskGraphId) as { counts: Record<string, number>; taskCount: number; blockedBy: string[]; status: { state: string; routing: string } };
  assert.deepEqual(b.counts, { unscheduled: 1, pending: 0, running: 0, completed: 0, failed: 1, exception: 0 });
  assert.equal(b.taskCount, 2);
  assert.deepEqual(b.blockedBy, [blocked.ids.get('broken')]);
  assert.equal(b.status.routing, 'tests');
  assert.deepEqual((byId.get(running.taskGraphId) as { counts: Record<string, number> }).counts.pending, 1);

  for (const [state, id] of [['blocked', blocked.taskGraphId], ['finished', finished.taskGraphId], ['running', running.taskGraphId]]) {
    const page = await stack.root.request('scheduler', 'GET', `/task-graphs?state=${state}`);
    assert.ok(page.taskGraphs.length >= 1);
    assert.ok(page.taskGraphs.every((g: { status: { state: string } }) => g.status.state === state), state);
    assert.ok(page.taskGraphs.some((g: { status: { taskGraphId: string } }) => g.status.taskGraphId === id), state);
  }
  assert.equal((await stack.root.request('scheduler', 'GET', '/task-graphs?state=canceled')).taskGraphs.length, 0);

  // pages of 2 add up to the whole list, in order
  const paged: string[] = [];
  let token: string | undefined;
  do {
    const page = await stack.root.request('scheduler', 'GET', `/task-graphs?limit=2${token ? `&continuationToken=${token}` : ''}`);
    assert.ok(page.taskGraphs.length <= 2);
    paged.push(...page.taskGraphs.map((g: { status: { taskGraphId: string } }) => g.status.taskGraphId));
    token = page.continuationToken;
  } while (token);
  assert.deepEqual(paged, ids);

  await assert.rejects(stack.root.request('scheduler', 'GET', '/task-graphs?state=sleeping'), (err: { status: number }) => err.status === 400);
  await assert.rejects(stack.root.request('scheduler', 'GET', '/task-graphs?continuationToken=bm9wZQ'), (err: { status: number; message: string }) => err.status === 400 && /continuationToken/.test(err.message));
  // the list is declared and documented like the other endpoints
  const openapi = (await (await fetch(`${stack.api.rootUrl}/api/scheduler/v1/openapi.json`)).json()) as { paths: Record<string, { get?: unknown }> };
  assert.ok(openapi.paths['/task-graphs'].get);
  assert.ok(openapi.paths['/task-graph/{taskGraphId}/changes'].get);
  assert.ok(openapi.paths['/task-graph/{taskGraphId}/nodes'].get);
});

test('nodes: the graph as arrays, in node order, with requires as node indexes; fromIdx reads the tail', async () => {
  const { taskGraphId, ids } = await submit(manualGraph({ root: {}, left: { requires: ['root'] }, right: { requires: ['root'] }, join: { requires: ['left', 'right'] } }, 'nodes'));
  const nodes = await stack.root.request('scheduler', 'GET', `/task-graph/${taskGraphId}/nodes`);
  assert.deepEqual(nodes.labels, ['root', 'left', 'right', 'join']);
  assert.equal(nodes.taskIds, ['root', 'left', 'right', 'join'].map((l) => ids.get(l)).join(''));
  assert.equal(nodes.members, '1111');
  assert.deepEqual(nodes.requireCounts, [0, 1, 1, 2]);
  assert.deepEqual(nodes.requires, [0, 0, 1, 2]);
  assert.equal(nodes.nodeCount, 4);
  assert.equal(nodes.taskCount, 4);
  assert.match(nodes.states, /^[pu]uuu$/);
  const tail = await stack.root.request('scheduler', 'GET', `/task-graph/${taskGraphId}/nodes?fromIdx=3`);
  assert.deepEqual(tail.labels, ['join']);
  assert.deepEqual(tail.requires, [1, 2]);
  await assert.rejects(stack.root.request('scheduler', 'GET', `/task-graph/${slugid.nice()}/nodes`), (err: { status: number }) => err.status === 404);
});

test('nodes: a graph over 10,000 nodes (read with a forced hash join, no JIT) comes back whole, in node order, with its states', async () => {
  const { graph } = layeredGraph(11, 1000, 'big-nodes');
  const { taskGraphId, ids } = await submit(graph);
  const labels = Object.keys(graph.tasks);
  const index = new Map(labels.map((l, i) => [l, i]));
  // layer 0 (the first 1,000 labels) pending once the workflow has dispatched it, every other task unscheduled
  const expected = 'p'.repeat(1000) + 'u'.repeat(10_000);
  const nodes = await eventually(async () => {
    const n = await stack.root.request('scheduler', 'GET', `/task-graph/${taskGraphId}/nodes`);
    return n.states === expected ? n : undefined;
  }, 'layer 0 pending', 60_000);
  assert.equal(nodes.nodeCount, 11_000);
  assert.deepEqual(nodes.labels, labels);
  assert.equal(nodes.taskIds, labels.map((l) => ids.get(l)).join(''));
  assert.equal(nodes.members, '1'.repeat(11_000));
  assert.deepEqual(nodes.requireCounts, labels.map((l) => graph.tasks[l].requires.length));
  assert.deepEqual(nodes.requires, labels.flatMap((l) => graph.tasks[l].requires.map((r) => index.get(r))));
  assert.deepEqual(nodes.runs, [...Array(1000).fill(1), ...Array(10_000).fill(0)]);
  assert.ok(nodes.started.every((t: number | null) => t === null) && nodes.resolved.every((t: number | null) => t === null));
});

test('changes: a state change after the cursor is delivered once, with the latest run times', async () => {
  const { taskGraphId, ids } = await submit(manualGraph({ first: {}, second: { requires: ['first'] } }, 'changes'));
  const first = ids.get('first') as string;
  await eventually(async () => (await stack.root.request('queue', 'GET', `/task/${first}/status`)).status.state === 'pending', 'first pending');
  const start = await changes(taskGraphId);
  assert.equal(start.changes.states, '', 'without since: only the cursor');
  // a long-poll waiting for the claim
  const waiting = changes(taskGraphId, start.cursor, 20);
  const claimed = await claim('changes');
  assert.equal(claimed.status.taskId, first);
  const answer = await waiting;
  assert.equal(changedStates(answer).get(first), 'r');
  assert.equal(answer.changes.runs[0], 1);
  assert.equal(typeof answer.changes.started[0], 'number');
  assert.equal(answer.changes.resolved[0], null);
  // nothing new since that answer
  const quiet = await changes(taskGraphId, answer.cursor, 0);
  assert.equal(quiet.changes.states, '');
  assert.equal(quiet.graphChanged, false);
  // completing it changes both tasks (second becomes pending)
  await stack.root.request('queue', 'POST', `/task/${first}/runs/0/completed`, undefined, claimed.credentials);
  const done = await eventually(async () => {
    const a = await changes(taskGraphId, answer.cursor, 5);
    return changedStates(a).get(ids.get('second') as string) === 'p' ? a : undefined;
  }, 'second pending');
  assert.equal(changedStates(done).get(first), 'c');
  assert.equal(typeof done.changes.resolved[done.changes.taskIds.indexOf(first) / 22], 'number');
  // the nodes answer says the same of both tasks as the changes feed, to the millisecond
  const nodes = await stack.root.request('scheduler', 'GET', `/task-graph/${taskGraphId}/nodes`);
  assert.equal(nodes.timeBase, done.timeBase);
  for (const [i, label] of ['first', 'second'].entries()) {
    const k = done.changes.taskIds.indexOf(ids.get(label) as string) / 22;
    assert.deepEqual(
      { state: nodes.states[i], runs: nodes.runs[i], started: nodes.started[i], resolved: nodes.resolved[i] },
      { state: done.changes.states[k], runs: done.changes.runs[k], started: done.changes.started[k], resolved: done.changes.resolved[k] },
      label,
    );
  }
  await assert.rejects(changes(taskGraphId, 'not-a-cursor'), (err: { status: number }) => err.status === 400);
  await assert.rejects(changes(taskGraphId, '9:5:'), (err: { status: number; message: string }) => err.status === 400 && /cursor/.test(err.message));
});

test('changes: a transaction that began before the cursor and commits after it is still delivered', async () => {
  const { taskGraphId, ids } = await submit(manualGraph({ early: {}, late: {} }, 'commits'));
  await eventually(async () => (await stack.root.request('scheduler', 'GET', `/task-graph/${taskGraphId}/nodes`)).states === 'pp', 'both pending');
  const slow = await stack.api.db.pool.connect();
  try {
    // This transaction takes its id first but commits last (a sequence number would fall behind the cursor).
    await slow.query('BEGIN');
    await slow.query("UPDATE tasks SET state = 'exception' WHERE task_id = $1", [ids.get('early')]);
    const cursor = (await changes(taskGraphId)).cursor;
    await stack.api.db.pool.query("UPDATE tasks SET state = 'exception' WHERE task_id = $1", [ids.get('late')]);
    const beforeCommit = changedStates(await changes(taskGraphId, cursor));
    assert.deepEqual([...beforeCommit.keys()], [ids.get('late')]);
    await slow.query('COMMIT');
    const afterCommit = await changes(taskGraphId, cursor);
    assert.deepEqual([...changedStates(afterCommit).entries()].sort(), [[ids.get('early'), 'e'], [ids.get('late'), 'e']].sort());
    // and from the newer cursor only what is new
    assert.equal((await changes(taskGraphId, afterCommit.cursor)).changes.states, '');
  } finally {
    slow.release();
  }
});

test('changes: graph state, blocking tasks and extensions show in the answer', async () => {
  const { taskGraphId, ids } = await submit(graphOf({ broken: { outcomes: ['failed'] } }));
  const start = await changes(taskGraphId);
  await waitState(taskGraphId, 'blocked');
  const blocked = await changes(taskGraphId, start.cursor);
  assert.equal(blocked.graphChanged, true);
  assert.equal(blocked.status.state, 'blocked');
  assert.deepEqual(blocked.blockedBy, [ids.get('broken')]);
  await stack.root.request('scheduler', 'POST', `/task-graph/${taskGraphId}/extend`, { tasks: graphOf({ more: { requires: ['broken'] } }).tasks });
  const extended = await changes(taskGraphId, blocked.cursor, 5);
  assert.equal(extended.graphChanged, true);
  assert.equal(extended.nodeCount, 2);
  const tail = await stack.root.request('scheduler', 'GET', `/task-graph/${taskGraphId}/nodes?fromIdx=1`);
  assert.deepEqual(tail.labels, ['more']);
  assert.deepEqual(tail.requires, [0]);
  await stack.root.request('scheduler', 'POST', `/task-graph/${taskGraphId}/cancel`);
  // Follow the feed as the UI does: the workflow's own reaction to the extension may be the next change.
  let canceled = await changes(taskGraphId, extended.cursor, 5);
  for (let i = 0; i < 5 && canceled.status.state !== 'canceled'; i++) canceled = await changes(taskGraphId, canceled.cursor, 5);
  assert.equal(canceled.status.state, 'canceled');
  assert.equal(canceled.graphChanged, true);
});

test('changes: an amend that adds no node (a priority patch) wakes a waiting request, which says the amend\'s number; the nodes answer says it too', async () => {
  const { taskGraphId } = await submit(manualGraph({ first: {}, second: { requires: ['first'] } }, `notice-${slugid.nice().slice(0, 10)}`));
  const start = await changes(taskGraphId);
  assert.equal(start.amends, 0);
  assert.equal((await stack.root.request<{ amends: number }>('scheduler', 'GET', `/task-graph/${taskGraphId}/nodes`)).amends, 0);
  // a page following the graph waits on its cursor while another client amends
  const asked = Date.now();
  const waiting = changes(taskGraphId, start.cursor, 60);
  await new Promise((r) => setTimeout(r, 300));
  const file = await stack.root.request<{ tasks: Record<string, { task: Record<string, unknown> }> }>('scheduler', 'GET', `/task-graph/${taskGraphId}/file`);
  file.tasks.second.task.priority = 'high';
  const amended = await stack.root.request<{ classification: { metadata: string[] } }>('scheduler', 'PUT', `/task-graph/${taskGraphId}/amend`, { tasks: file.tasks });
  assert.deepEqual(amended.classification.metadata, ['second']);
  // follow the feed as the page does (the graph's own start may be the first change): 60 s is each request's own wait,
  // so reaching the amend well before it means the amend woke the feed (no task changes state here)
  let woken = await waiting;
  while (woken.amends === 0 && Date.now() - asked < 30_000) woken = await changes(taskGraphId, woken.cursor, 60);
  assert.ok(Date.now() - asked < 30_000, `the feed said the amend after ${Date.now() - asked} ms`);
  assert.equal(woken.graphChanged, true);
  assert.equal(woken.amends, 1);
  assert.equal(woken.nodeCount, 2, 'no node was added');
  const nodes = await stack.root.request<{ amends: number; labels: string[]; amend: string }>('scheduler', 'GET', `/task-graph/${taskGraphId}/nodes`);
  assert.equal(nodes.amends, 1);
  assert.equal(nodes.amend[nodes.labels.indexOf('second')], 'm', 'what the page reloads for: the patched mark');
});

test('changes: an external task (another group the graph depends on) is followed too', async () => {
  const groupA = slugid.nice();
  const groupB = slugid.nice();
  const upstream = slugid.nice();
  const downstream = slugid.nice();
  await stack.root.request('queue', 'PUT', `/task/${upstream}`, { ...fastTask('upstream'), workerType: 'external', taskGroupId: groupA, schedulerId: 'tests' });
  await stack.root.request('queue', 'PUT', `/task/${downstream}`, { ...fastTask('downstream'), workerType: 'external', taskGroupId: groupB, schedulerId: 'tests', dependencies: [upstream] });
  const nodes = await eventually(async () => {
    const n = await stack.root.request('scheduler', 'GET', `/task-graph/${groupB}/nodes`);
    return n.members.includes('0') ? n : undefined;
  }, 'the queue-level graph with its external node');
  assert.equal(nodes.labels[nodes.members.indexOf('0')], '');
  const claimed = await claim('external');
  assert.equal(claimed.status.taskId, upstream);
  const answer = await eventually(async () => {
    const a = await changes(groupB, nodes.cursor, 5);
    return changedStates(a).get(upstream) === 'r' ? a : undefined;
  }, 'the external task running');
  assert.ok(answer);
});

test('an API shutting down answers its open changes long-polls instead of waiting for them', async () => {
  const api = await startTestApi();
  const taskGraphId = slugid.nice();
  await api.db.pool.query("INSERT INTO task_graphs (task_graph_id, scheduler_id) VALUES ($1, 'tests')", [taskGraphId]);
  const { body: start } = await api.request('GET', `/api/scheduler/v1/task-graph/${taskGraphId}/changes`, undefined, null);
  let answered: { status: number; body: any } | undefined;
  const waiting = api.request('GET', `/api/scheduler/v1/task-graph/${taskGraphId}/changes?since=${encodeURIComponent(start.cursor)}`, undefined, null).then((r) => (answered = r));
  // let it reach its wait for changes
  await new Promise((r) => setTimeout(r, 500));
  await api.close();
  assert.equal(answered?.status, 200, 'answered before the API finished closing');
  assert.equal(answered?.body.changes.states, '');
  await waiting;
});
