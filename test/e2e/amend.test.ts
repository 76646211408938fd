import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { eventually } from '../../support/stack.js';
import type { ClaimedTask, Outcome } from '../../support/fastWorker.js';
import { fastTask } from '../../support/graphs.js';
import { useStack } from '../helpers/stackFixture.js';
import { createClient } from '../../src/auth/clients.js';
import { ApiClient, TgsApiError } from '../../src/client/http.js';
import { ArtifactUploader } from '../../src/shellWorker/artifacts.js';
import type { AmendedGraph } from '../../src/client/tgsClient.js';

/*
 * Amend on the real stack (docs/formats.md § Amend, § Early cutoff): the edited graph file classified label by label,
 * exactly the changed labels rerun, and their dependents unless what they require came out byte-identical. The worker
 * records every claim by taskId; a task whose payload has `output` uploads it as public/out.txt, after a log that
 * differs on every run (logs are not outputs).
 */
const claims: string[] = [];
async function run(t: ClaimedTask): Promise<Outcome> {
  const payload = t.task.payload as { output?: string; outputExpiresInMs?: number; outcomes?: Outcome[] };
  if (typeof payload.output === 'string') {
    const uploader = new ArtifactUploader(() => new ApiClient(stack.api.rootUrl, t.credentials), t.taskId, t.runId);
    const expires = new Date(Date.now() + (payload.outputExpiresInMs ?? 2 * 86_400_000)).toISOString();
    await uploader.upload('public/logs/live.log', Buffer.from(`run ${t.runId} of ${t.taskId} at ${new Date().toISOString()}\n`), 'text/plain', expires);
    await uploader.upload('public/out.txt', Buffer.from(payload.output), 'text/plain', expires);
  }
  return payload.outcomes?.[t.runId] ?? payload.outcomes?.at(-1) ?? 'completed';
}
const stack = useStack({
  worker: {
    concurrency: 4,
    onClaim: (t: ClaimedTask) => claims.push(t.taskId),
    decide: run,
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

type AmendAnswer = AmendedGraph;

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

const pipeline = (buildScript: string, buildOutput = 'app v1'): Record<string, Node> => ({
  lint: { payload: { script: 'eslint .' } },
  build: { payload: { script: buildScript, output: buildOutput } },
  test: { requires: ['build'], payload: { script: 'npm test', output: 'ok' } },
});
const status = (taskId: string) =>
  stack.root.request<{ status: { state: string; runs: { workerGroup?: string; keptFrom?: { taskId: string; runId: number } }[] } }>('queue', 'GET', `/task/${taskId}/status`);
const inspect = (taskGraphId: string, label: string) =>
  stack.root.request<{ taskId: string; amended?: string; replaces?: string; cutoff?: string }>('scheduler', 'GET', `/task-graph/${taskGraphId}/inspect/${label}`);
const amendMarks = async (taskGraphId: string) => {
  const nodes = await stack.root.request<{ labels: string[]; amend: string; members: string; taskIds: string }>('scheduler', 'GET', `/task-graph/${taskGraphId}/nodes`);
  return Object.fromEntries([...nodes.amend].map((mark, i) => [nodes.members[i] === '1' ? nodes.labels[i] : `old:${nodes.labels[i]}:${nodes.taskIds.slice(i * 22, i * 22 + 22)}`, mark]));
};

test('a finished graph: the dry run changes nothing; a comment changed in build reruns build, whose identical bytes keep test without a claim; lint is kept and the graph finishes again', async () => {
  const g = await submit(file(pipeline('make all')));
  await waitState(g.taskGraphId, 'finished');
  const before = await members(g.taskGraphId);
  const claimsBefore = claims.length;

  const edited = file(pipeline('make all # faster now'));
  const dry = await amend(g.taskGraphId, edited, true);
  assert.equal(dry.dryRun, true);
  assert.equal(dry.workflow, 'dry-run');
  assert.deepEqual(dry.classification, { changed: ['build'], metadata: ['lint'], added: [], dependent: ['test'], removed: [], unchanged: 0 });
  assert.deepEqual(dry.mayBeKept, ['test']);
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
  assert.equal(claimsOf(fresh.get('test') as string), 0, 'test was kept: zero claims');
  assert.equal(claims.length - claimsBefore, 1, 'only build ran again');
  assert.equal(claimsOf(g.ids.get('lint') as string), 1);
  // the kept test: completed from the run of the task it replaces, its artifacts read there
  const kept = (await status(fresh.get('test') as string)).status;
  assert.equal(kept.state, 'completed');
  assert.deepEqual(kept.runs[0].keptFrom, { taskId: g.ids.get('test'), runId: 0 });
  assert.equal(kept.runs[0].workerGroup, 'tgs-cutoff');
  const out = await fetch(`${stack.api.rootUrl}/api/queue/v1/task/${fresh.get('test')}/runs/0/artifacts/public/out.txt`);
  assert.equal(await out.text(), 'ok');
  const testNode = await inspect(g.taskGraphId, 'test');
  assert.equal(testNode.amended, 'dependent');
  assert.equal(testNode.replaces, g.ids.get('test'));
  assert.equal(testNode.cutoff, "kept: build's outputs unchanged");
  const marks = await amendMarks(g.taskGraphId);
  assert.equal(marks.build, 'c');
  assert.equal(marks.test, 'k');
  assert.equal(marks.lint, 'm');
  assert.equal(marks[`old:build:${g.ids.get('build')}`], 's', 'the superseded build keeps its label');
  const why = await stack.root.request<{ lastAmend: { amend: number; nodes: { label: string; taskId: string; amended: string; cutoff?: string }[] } }>('scheduler', 'GET', `/task-graph/${g.taskGraphId}/explain`);
  assert.equal(why.lastAmend.amend, 1);
  assert.deepEqual(why.lastAmend.nodes.find((n) => n.label === 'test'), { label: 'test', taskId: fresh.get('test'), amended: 'dependent', cutoff: "kept: build's outputs unchanged" });
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

test('a completed dependent whose artifacts expire before its replacement\'s deadline is rerun, not kept', async () => {
  const nodes = (script: string): Record<string, Node> => ({
    build: { payload: { script, output: 'same' } },
    test: { requires: ['build'], payload: { output: 'short-lived', outputExpiresInMs: 10 * 60_000 } },
  });
  const g = await submit(file(nodes('make')));
  await waitState(g.taskGraphId, 'finished');
  const res = await amend(g.taskGraphId, file(nodes('make # again')));
  await waitState(g.taskGraphId, 'finished');
  const fresh = new Map(res.tasks.map((t) => [t.label, t.taskId]));
  assert.equal(claimsOf(fresh.get('test') as string), 1, 'test ran again');
  assert.match((await inspect(g.taskGraphId, 'test')).cutoff ?? '', new RegExp(`^rerun: the run it would keep \\(${g.ids.get('test')} run 0\\) has artifacts that expire before `));
});

test('a file read back with GET .../file amends after the queue\'s 15 minutes: a new task gets created = now, its deadline moved by as much', async () => {
  const hourAgo = Date.now() - 3600_000;
  const old = (label: string, script: string) => ({ ...fastTask(label), created: new Date(hourAgo).toISOString(), deadline: new Date(hourAgo + 2 * 3600_000).toISOString(), payload: { script } });
  const g = await submit(file(pipeline('make')));
  await waitState(g.taskGraphId, 'finished');
  // the file as the graph holds it, then edited: its tasks' times are an hour old
  const current = await stack.root.request<{ tasks: Record<string, { requires: string[]; task: Record<string, unknown> }> }>('scheduler', 'GET', `/task-graph/${g.taskGraphId}/file`);
  const edited = { tasks: { ...current.tasks, build: { ...current.tasks.build, task: old('build', 'make # moved') } } };
  const res = await amend(g.taskGraphId, edited);
  assert.deepEqual(res.classification.changed, ['build']);
  const task = await stack.root.request<{ created: string; deadline: string }>('queue', 'GET', `/task/${res.tasks.find((t) => t.label === 'build')?.taskId}`);
  assert.ok(Math.abs(Date.parse(task.created) - Date.now()) < 60_000, task.created);
  assert.equal(Date.parse(task.deadline) - Date.parse(task.created), 2 * 3600_000, 'the task keeps the two hours it was given');
  await waitState(g.taskGraphId, 'finished');
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

test('digdag #144: a changed upstream under an unchanged name is rerun, and what requires it reruns when its output changed', async () => {
  const nodes = (prepare: string): Record<string, Node> => ({
    prepare: { payload: { query: prepare, output: `rows of ${prepare}` } },
    main: { requires: ['prepare'], payload: { run: 'main', output: 'main' } },
  });
  const g = await submit(file(nodes('SELECT 1')));
  await waitState(g.taskGraphId, 'finished');
  const res = await amend(g.taskGraphId, file(nodes('SELECT 2')));
  assert.deepEqual(res.classification.changed, ['prepare']);
  assert.deepEqual(res.classification.dependent, ['main']);
  await waitState(g.taskGraphId, 'finished');
  const fresh = new Map(res.tasks.map((t) => [t.label, t.taskId]));
  assert.equal(claimsOf(fresh.get('prepare') as string), 1);
  assert.equal(claimsOf(fresh.get('main') as string), 1);
  assert.equal((await inspect(g.taskGraphId, 'main')).cutoff, "rerun: prepare's outputs changed (public/out.txt)");
  assert.equal((await amendMarks(g.taskGraphId)).main, 'd');
});

test('early cutoff down a chain: identical bytes keep every completed dependent; changed bytes rerun the next one, whose identical bytes keep the rest', async () => {
  const chain = (script: string, output: string): Record<string, Node> => ({
    build: { payload: { script, output } },
    test: { requires: ['build'], payload: { script: 'npm test', output: 'tests passed' } },
    deploy: { requires: ['test'], payload: { script: 'deploy', output: 'deployed' } },
  });
  const g = await submit(file(chain('make', 'v1')));
  await waitState(g.taskGraphId, 'finished');
  let claimsBefore = claims.length;
  const first = await amend(g.taskGraphId, file(chain('make # comment', 'v1')));
  assert.deepEqual(first.mayBeKept, ['deploy', 'test']);
  await waitState(g.taskGraphId, 'finished');
  let fresh = new Map(first.tasks.map((t) => [t.label, t.taskId]));
  assert.deepEqual(claims.slice(claimsBefore), [fresh.get('build')], 'only build ran');
  assert.equal((await inspect(g.taskGraphId, 'test')).cutoff, "kept: build's outputs unchanged");
  assert.equal((await inspect(g.taskGraphId, 'deploy')).cutoff, "kept: test's outputs unchanged");
  // the kept deploy reuses the first deploy's run: what it keeps is followed to the run that produced it
  assert.deepEqual((await status(fresh.get('deploy') as string)).status.runs[0].keptFrom, { taskId: g.ids.get('deploy'), runId: 0 });

  claimsBefore = claims.length;
  const second = await amend(g.taskGraphId, file(chain('make VERSION=2', 'v2')));
  await waitState(g.taskGraphId, 'finished');
  fresh = new Map(second.tasks.map((t) => [t.label, t.taskId]));
  assert.deepEqual(claims.slice(claimsBefore).sort(), [fresh.get('build'), fresh.get('test')].sort(), 'build and test ran, deploy did not');
  assert.equal((await inspect(g.taskGraphId, 'test')).cutoff, "rerun: build's outputs changed (public/out.txt)");
  assert.equal((await inspect(g.taskGraphId, 'deploy')).cutoff, "kept: test's outputs unchanged");
  const marks = await amendMarks(g.taskGraphId);
  assert.deepEqual([marks.build, marks.test, marks.deploy], ['c', 'd', 'k']);
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

test('cached nodes: a change outside the keys (reruns) replaces toolchain and its dependents, and nothing runs: the cached ones reuse the runs they replace, and the uncached test is kept', async () => {
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
  assert.deepEqual(claims.slice(claimsBefore), [], 'nothing ran: the cached nodes reused their runs, and test was kept by the early cutoff');
  assert.equal((await inspect(g.taskGraphId, 'test')).cutoff, "kept: build's outputs unchanged");
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
