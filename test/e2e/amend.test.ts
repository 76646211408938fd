import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { eventually } from '../../support/stack.js';
import type { ClaimedTask } from '../../support/fastWorker.js';
import { fastTask } from '../../support/graphs.js';
import { useStack } from '../helpers/stackFixture.js';
import { createClient } from '../../src/auth/clients.js';
import { ApiClient, TgsApiError } from '../../src/client/http.js';

/*
 * Amend on the real stack (docs/formats.md § Amend): the edited graph file classified label by label, exactly the
 * changed labels and their dependents rerun. The worker records every claim by taskId.
 */
const claims: string[] = [];
const stack = useStack({
  worker: {
    concurrency: 4,
    onClaim: (t: ClaimedTask) => claims.push(t.taskId),
  },
});

type Node = { requires?: string[]; payload?: Record<string, unknown>; outcomes?: string[]; priority?: string };
/** A graph file as a user keeps it: made again from the same description each time (its `created` moves). */
const file = (nodes: Record<string, Node>) => ({
  tasks: Object.fromEntries(
    Object.entries(nodes).map(([label, n]) => [
      label,
      { requires: n.requires ?? [], task: { ...fastTask(label, n.outcomes ?? ['completed'], n.payload ?? {}), ...(n.priority ? { priority: n.priority } : {}) } },
    ]),
  ),
});

interface AmendAnswer {
  dryRun: boolean;
  state: string;
  amend?: number;
  workflow: string;
  classification: { changed: string[]; metadata: string[]; added: string[]; dependent: string[]; removed: string[]; unchanged: number };
  tasks: { label: string; taskId: string }[];
}

async function submit(graph: unknown) {
  const taskGraphId = slugid.nice();
  const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graph);
  return { taskGraphId, ids: new Map(res.tasks.map((t) => [t.label, t.taskId])) };
}
const amend = (taskGraphId: string, graph: unknown, dryRun = false) =>
  stack.root.request<AmendAnswer>('scheduler', 'PUT', `/task-graph/${taskGraphId}/amend${dryRun ? '?dryRun=true' : ''}`, graph);
const graphState = async (id: string) => (await stack.root.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${id}/status`)).status.state;
const waitState = (id: string, state: string) => eventually(async () => (await graphState(id)) === state, `graph ${id} ${state}`, 60_000);
const task = async (taskId: string) => (await stack.root.request<{ status: { state: string; runs: { reasonResolved?: string }[] } }>('queue', 'GET', `/task/${taskId}/status`)).status;
const definition = (taskId: string) => stack.root.request<{ priority: string }>('queue', 'GET', `/task/${taskId}`);
const members = async (taskGraphId: string) =>
  (await stack.api.db.pool.query<{ label: string; task_id: string }>('SELECT label, task_id FROM graph_nodes WHERE task_graph_id = $1 AND member ORDER BY label', [taskGraphId])).rows;
const claimsOf = (taskId: string) => claims.filter((c) => c === taskId).length;

const pipeline = (buildScript: string): Record<string, Node> => ({
  lint: { payload: { script: 'eslint .' } },
  build: { payload: { script: buildScript } },
  test: { requires: ['build'], payload: { script: 'npm test' } },
});

test('a finished graph: the dry run changes nothing; a comment changed in build reruns build and test, keeps lint, and finishes the graph again', async () => {
  const g = await submit(file(pipeline('make all')));
  await waitState(g.taskGraphId, 'finished');
  const before = await members(g.taskGraphId);
  const claimsBefore = claims.length;

  const edited = file(pipeline('make all # faster now'));
  const dry = await amend(g.taskGraphId, edited, true);
  assert.equal(dry.dryRun, true);
  assert.equal(dry.workflow, 'dry-run');
  assert.deepEqual(dry.classification, { changed: ['build'], metadata: ['lint'], added: [], dependent: ['test'], removed: [], unchanged: 0 });
  assert.deepEqual(dry.tasks, []);
  assert.equal(await graphState(g.taskGraphId), 'finished', 'a dry run leaves the graph finished');
  assert.deepEqual(await members(g.taskGraphId), before, 'a dry run writes no node');
  const { rows: amends } = await stack.api.db.pool.query('SELECT 1 FROM graph_amends WHERE task_graph_id = $1', [g.taskGraphId]);
  assert.equal(amends.length, 0);

  const real = await amend(g.taskGraphId, edited);
  assert.equal(real.workflow, 'started');
  assert.equal(real.state, 'running', 'announced running again');
  assert.equal(real.amend, 1);
  const fresh = new Map(real.tasks.map((t) => [t.label, t.taskId]));
  assert.deepEqual([...fresh.keys()].sort(), ['build', 'test']);
  await waitState(g.taskGraphId, 'finished');
  assert.equal(claimsOf(fresh.get('build') as string), 1);
  assert.equal(claimsOf(fresh.get('test') as string), 1);
  assert.equal(claims.length - claimsBefore, 2, 'lint was not run again');
  assert.equal(claimsOf(g.ids.get('lint') as string), 1);
  const after = new Map((await members(g.taskGraphId)).map((m) => [m.label, m.task_id]));
  assert.equal(after.get('lint'), g.ids.get('lint'));
  assert.equal(after.get('build'), fresh.get('build'));
  // the replaced tasks stay in the graph's history, completed as they were
  assert.equal((await task(g.ids.get('build') as string)).state, 'completed');
  const { rows } = await stack.api.db.pool.query<{ superseded_by: number }>('SELECT superseded_by FROM graph_nodes WHERE task_graph_id = $1 AND task_id = $2', [g.taskGraphId, g.ids.get('build')]);
  assert.ok(rows[0].superseded_by >= 3, 'the old node names its replacement');

  // the same file again (a client's retry): every label unchanged, nothing rerun
  const again = await amend(g.taskGraphId, edited);
  assert.equal(again.workflow, 'unchanged');
  assert.deepEqual(again.classification, { changed: [], metadata: [], added: [], dependent: [], removed: [], unchanged: 3 });
  assert.deepEqual(again.tasks, []);
  assert.equal(await graphState(g.taskGraphId), 'finished');
});

test('a priority-only amend patches the tasks and makes zero claims', async () => {
  const nodes = pipeline('make');
  const g = await submit(file(nodes));
  await waitState(g.taskGraphId, 'finished');
  const claimsBefore = claims.length;
  const res = await amend(g.taskGraphId, file({ ...nodes, build: { ...nodes.build, priority: 'high' } }));
  assert.deepEqual(res.classification.changed, []);
  assert.deepEqual(res.classification.dependent, []);
  assert.ok(res.classification.metadata.includes('build'));
  assert.equal(res.workflow, 'unchanged');
  assert.equal((await definition(g.ids.get('build') as string)).priority, 'high');
  assert.equal(await graphState(g.taskGraphId), 'finished');
  await new Promise((r) => setTimeout(r, 500));
  assert.equal(claims.length, claimsBefore, 'zero claims');
});

test('digdag #144: a changed upstream under an unchanged name is rerun, with what requires it', async () => {
  const nodes = (prepare: string): Record<string, Node> => ({ prepare: { payload: { query: prepare } }, main: { requires: ['prepare'], payload: { run: 'main' } } });
  const g = await submit(file(nodes('SELECT 1')));
  await waitState(g.taskGraphId, 'finished');
  const res = await amend(g.taskGraphId, file(nodes('SELECT 2')));
  assert.deepEqual(res.classification.changed, ['prepare']);
  assert.deepEqual(res.classification.dependent, ['main']);
  await waitState(g.taskGraphId, 'finished');
  const fresh = new Map(res.tasks.map((t) => [t.label, t.taskId]));
  assert.equal(claimsOf(fresh.get('prepare') as string), 1);
  assert.equal(claimsOf(fresh.get('main') as string), 1);
});

test('a blocked graph: the failing build fixed by an amend runs again, its waiting dependent is replaced, the graph finishes', async () => {
  const nodes = (outcomes: string[]): Record<string, Node> => ({
    build: { outcomes, payload: { script: outcomes[0] === 'failed' ? 'exit 1' : 'make' } },
    test: { requires: ['build'] },
    docs: {},
  });
  const g = await submit(file(nodes(['failed'])));
  await waitState(g.taskGraphId, 'blocked');
  const res = await amend(g.taskGraphId, file(nodes(['completed'])));
  assert.equal(res.workflow, 'updated');
  assert.deepEqual(res.classification.changed, ['build']);
  assert.deepEqual(res.classification.dependent, ['test']);
  await waitState(g.taskGraphId, 'finished');
  const fresh = new Map(res.tasks.map((t) => [t.label, t.taskId]));
  assert.equal(claimsOf(fresh.get('build') as string), 1);
  assert.equal(claimsOf(fresh.get('test') as string), 1);
  assert.equal(claimsOf(g.ids.get('test') as string), 0, 'the old test never ran');
  const old = await task(g.ids.get('test') as string);
  assert.equal(old.state, 'exception', 'the old, unresolved test was canceled');
  assert.equal(old.runs.at(-1)?.reasonResolved, 'canceled');
  assert.equal(claimsOf(g.ids.get('docs') as string), 1, 'docs was kept');
});

test('a running graph: a removed label waiting on a task nobody runs is canceled, an added one runs, and the graph finishes', async () => {
  const stuck = (label: string, requires: string[] = []) => ({ requires, task: { ...fastTask(label), workerType: 'nobody' } });
  const g = await submit({ tasks: { a: file({ a: {} }).tasks.a, slow: stuck('slow'), after: stuck('after', ['slow']) } });
  await eventually(async () => (await task(g.ids.get('a') as string)).state === 'completed', 'a completed', 30_000);
  assert.equal(await graphState(g.taskGraphId), 'running');
  const res = await amend(g.taskGraphId, { tasks: { a: file({ a: {} }).tasks.a, extra: file({ extra: { requires: ['a'] } }).tasks.extra } });
  assert.equal(res.workflow, 'updated');
  assert.deepEqual(res.classification.removed, ['after', 'slow']);
  assert.deepEqual(res.classification.added, ['extra']);
  await waitState(g.taskGraphId, 'finished');
  for (const label of ['slow', 'after']) {
    const old = await task(g.ids.get(label) as string);
    assert.equal(old.state, 'exception', `${label} canceled`);
    assert.equal(old.runs.at(-1)?.reasonResolved, 'canceled');
  }
  assert.equal(claimsOf(res.tasks[0].taskId), 1);
  assert.equal(claimsOf(g.ids.get('a') as string), 1, 'a kept');
});

test('cached nodes: a change outside the keys (reruns) replaces toolchain and its dependents, but only the uncached test runs: the cached ones reuse the runs they replace', async () => {
  const cached = (reruns: number) => ({
    tasks: {
      toolchain: { reruns, cache: { name: 'amend-tool', digestData: { v: 1 } }, task: fastTask('toolchain', ['completed'], { kind: 'tool' }) },
      build: { requires: ['toolchain'], cache: { name: 'amend-build' }, task: fastTask('build', ['completed'], { tool: { $subs: 'taskId:toolchain' } }) },
      test: { requires: ['build'], task: fastTask('test', ['completed'], { kind: 'test' }) },
    },
  });
  const g = await submit(cached(0));
  await waitState(g.taskGraphId, 'finished');
  const lookupNow = async (label: string) =>
    (await stack.root.request<{ now: { result: string }[] }>('scheduler', 'GET', `/task-graph/${g.taskGraphId}/cache/${label}`)).now[0]?.result;
  // the relay indexes the entries after the completions
  await eventually(async () => (await lookupNow('toolchain')) === 'hit' && (await lookupNow('build')) === 'hit', 'entries written', 30_000);
  const claimsBefore = claims.length;
  const res = await amend(g.taskGraphId, cached(1));
  assert.deepEqual(res.classification.changed, ['toolchain']);
  assert.deepEqual(res.classification.dependent, ['build', 'test']);
  await waitState(g.taskGraphId, 'finished');
  const fresh = new Map(res.tasks.map((t) => [t.label, t.taskId]));
  assert.deepEqual(claims.slice(claimsBefore), [fresh.get('test')], 'only the uncached test ran');
  for (const label of ['toolchain', 'build']) {
    const run = (await stack.root.request<{ status: { runs: { cachedFrom?: { taskId: string } }[] } }>('queue', 'GET', `/task/${fresh.get(label)}/status`)).status.runs[0];
    assert.equal(run.cachedFrom?.taskId, g.ids.get(label), `${label} reused the run it replaces`);
  }
});

test('an invalid amend is refused with 400 naming the labels, and nothing is written', async () => {
  const nodes = pipeline('make');
  const g = await submit(file(nodes));
  await waitState(g.taskGraphId, 'finished');
  const before = await members(g.taskGraphId);
  const path = `/api/scheduler/v1/task-graph/${g.taskGraphId}/amend`;
  let res = await stack.api.request('PUT', path, file({ ...nodes, test: { requires: ['biuld'] } }));
  assert.equal(res.status, 400, JSON.stringify(res.body));
  assert.equal((res.body as { code: string }).code, 'InputValidationError');
  assert.match((res.body as { message: string }).message, /test: requires unknown label "biuld"/);
  res = await stack.api.request('PUT', path, file({ ...nodes, build: { requires: ['test'], payload: { script: 'make -j' } } }));
  assert.equal(res.status, 400, JSON.stringify(res.body));
  assert.match((res.body as { message: string }).message, /build: is on a dependency cycle/);
  assert.match((res.body as { message: string }).message, /test: is on a dependency cycle/);
  res = await stack.api.request('PUT', path, { tasks: { build: { task: 'not a task' } } });
  assert.equal(res.status, 400, JSON.stringify(res.body));
  assert.match((res.body as { message: string }).message, /build/);
  assert.deepEqual(await members(g.taskGraphId), before);
  const { rows } = await stack.api.db.pool.query('SELECT 1 FROM graph_amends WHERE task_graph_id = $1', [g.taskGraphId]);
  assert.equal(rows.length, 0);
  assert.equal(await graphState(g.taskGraphId), 'finished');
  // without the amend scope: 403 before anything is read
  res = await stack.api.request('PUT', path, file(nodes), null);
  assert.equal(res.status, 403, JSON.stringify(res.body));
});

test('an amend that raises a priority past the caller\'s scopes is refused with 403, and nothing is patched', async () => {
  const nodes = pipeline('make');
  const g = await submit(file(nodes));
  await waitState(g.taskGraphId, 'finished');
  const clientId = `amender-${slugid.nice()}`;
  const { accessToken } = await createClient(stack.api.db.pool, clientId, {
    description: 'may amend this graph, and create tasks at the lowest priority only',
    expires: new Date(Date.now() + 86_400_000).toISOString(),
    scopes: [`scheduler:amend-task-graph:${g.taskGraphId}`, 'queue:create-task:lowest:tgs-test/*', `queue:scheduler-id:${stack.config.schedulerId}`],
    deleteOnExpiration: false,
  });
  const amender = new ApiClient(stack.api.rootUrl, { clientId, accessToken });
  // the same tasks at their own priority: allowed (metadata only)
  const same = await amender.request<AmendAnswer>('scheduler', 'PUT', `/task-graph/${g.taskGraphId}/amend`, file(nodes));
  assert.deepEqual(same.classification.changed, []);
  await assert.rejects(
    amender.request('scheduler', 'PUT', `/task-graph/${g.taskGraphId}/amend`, file({ ...nodes, build: { ...nodes.build, priority: 'highest' } })),
    (err: unknown) => err instanceof TgsApiError && err.status === 403 && /queue:create-task:highest:tgs-test\/fast/.test(err.message),
  );
  assert.equal((await definition(g.ids.get('build') as string)).priority, 'lowest');
  const { rows } = await stack.api.db.pool.query('SELECT seq FROM graph_amends WHERE task_graph_id = $1', [g.taskGraphId]);
  assert.equal(rows.length, 1, 'only the allowed amend was recorded');
});
