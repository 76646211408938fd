import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, type TestApi } from '../../support/api.js';
import { graphOf, fastTask } from '../../support/graphs.js';
import { databaseCounts } from '../helpers/dbState.js';

// No Temporal here: these tests cover what is refused before any workflow would start.
let t: TestApi;
before(async () => {
  t = await startTestApi({ temporalAddress: '127.0.0.1:1' });
});
after(async () => {
  await t.close();
});

test('an invalid graph is one 400 naming every offending label, and nothing is written', async () => {
  const graph = graphOf({
    ok: {},
    loopA: { requires: ['loopB'] },
    loopB: { requires: ['loopA'] },
    orphan: { requires: ['missing'] },
    subs: { payload: { ref: { $subs: 'taskId:nowhere' } } },
    subsNoLabel: { payload: { ref: { $subs: 'taskId:no label' } } },
    badTask: {},
    badRouting: {},
  });
  (graph.tasks.badTask.task as Record<string, unknown>).priority = 'urgent';
  // an object that cannot be turned into a string (found by the graph fuzzer: it was a 500)
  (graph.tasks.badRouting.task as Record<string, unknown>).routing = { toString: 1 };
  const before = await databaseCounts(t.db.pool);
  const res = await t.request('PUT', `/api/scheduler/v1/task-graph/${slugid.nice()}`, graph);
  assert.equal(res.status, 400);
  assert.equal(res.body.code, 'InputValidationError');
  for (const label of ['loopA', 'loopB', 'orphan', 'subs', 'subsNoLabel', 'badTask', 'badRouting']) assert.match(res.body.message, new RegExp(`- ${label}:`));
  assert.doesNotMatch(res.body.message, /- ok:/);
  assert.match(res.body.message, /dependency cycle/);
  assert.match(res.body.message, /unknown label "missing"/);
  assert.match(res.body.message, /\$subs names unknown label "nowhere"/);
  assert.match(res.body.message, /- badRouting: task.routing must be at most 10 characters/);
  assert.match(res.body.message, /- subsNoLabel: bad \$subs .*"no label" is not a label/);
  assert.deepEqual(res.body.details.labels, ['badRouting', 'badTask', 'loopA', 'loopB', 'orphan', 'subs', 'subsNoLabel']);
  assert.deepEqual(await databaseCounts(t.db.pool), before);
});

test('envelope errors: routing over 10 characters, unknown properties, wrong types', async () => {
  const id = slugid.nice();
  const long = await t.request('PUT', `/api/scheduler/v1/task-graph/${id}`, graphOf({ a: {} }, 'way-too-long-routing'));
  assert.equal(long.status, 400);
  assert.match(long.body.message, /routing/);
  const extra = await t.request('PUT', `/api/scheduler/v1/task-graph/${id}`, { ...graphOf({ a: {} }), colour: 'blue' });
  assert.equal(extra.status, 400);
  assert.match(extra.body.message, /unknown property "colour"/);
  const wrong = await t.request('PUT', `/api/scheduler/v1/task-graph/${id}`, { tasks: { a: { reruns: '2', task: fastTask('a') } } });
  assert.equal(wrong.status, 400);
  assert.match(wrong.body.message, /reruns/);
  const badId = await t.request('PUT', '/api/scheduler/v1/task-graph/not-a-slugid', graphOf({ a: {} }));
  assert.equal(badId.status, 400);
  const malformed = await t.request('PUT', `/api/scheduler/v1/task-graph/${id}`, '{"tasks": ');
  assert.equal(malformed.status, 400);
  assert.equal(malformed.body.code, 'InputError');
  assert.equal((await databaseCounts(t.db.pool)).task_graphs, '0');
});

test('a client lacking a task scope gets 403 naming it, and nothing is written', async () => {
  await t.db.pool.query(
    `INSERT INTO clients (client_id, access_token, scopes, expires) VALUES ('graph-maker', 'secret-token', $1, now() + interval '1 hour')`,
    [['scheduler:create-task-graph', 'queue:scheduler-id:task-graph-scheduler']],
  );
  const res = await t.request('PUT', `/api/scheduler/v1/task-graph/${slugid.nice()}`, graphOf({ a: {} }), {
    clientId: 'graph-maker',
    accessToken: 'secret-token',
  });
  assert.equal(res.status, 403);
  assert.equal(res.body.code, 'InsufficientScopes');
  assert.match(res.body.message, /queue:create-task:lowest:tgs-test\/fast/);
  assert.equal((await databaseCounts(t.db.pool)).tasks, '0');
});

test('a valid graph is stored whole even when Temporal is unreachable; the same PUT retries the start', async () => {
  const id = slugid.nice();
  const graph = graphOf({ a: {}, b: { requires: ['a'] } });
  const res = await t.request('PUT', `/api/scheduler/v1/task-graph/${id}`, graph);
  assert.equal(res.status, 503);
  assert.match(res.body.message, /Retry the same request/);
  const { rows } = await t.db.pool.query('SELECT state FROM tasks ORDER BY created');
  assert.deepEqual(rows.map((r) => r.state), ['unscheduled', 'unscheduled'], 'no task runs without its workflow');
  const different = await t.request('PUT', `/api/scheduler/v1/task-graph/${id}`, graphOf({ a: {} }));
  assert.equal(different.status, 409);
  const status = await t.request('GET', `/api/scheduler/v1/task-graph/${id}/status`, undefined, null);
  assert.equal(status.status, 200);
  assert.deepEqual(status.body.status, { schedulerId: 'task-graph-scheduler', taskGraphId: id, state: 'running', routing: 'tests' });
  const inspect = await t.request('GET', `/api/scheduler/v1/task-graph/${id}/inspect?limit=1`, undefined, null);
  assert.equal(inspect.body.tasks.length, 1);
  assert.equal(inspect.body.tasks[0].label, 'a');
  assert.deepEqual(inspect.body.tasks[0].dependents, ['b']);
  const page2 = await t.request('GET', `/api/scheduler/v1/task-graph/${id}/inspect?limit=1&continuationToken=${inspect.body.continuationToken}`, undefined, null);
  assert.deepEqual(page2.body.tasks[0].requires, ['a']);
  assert.equal(page2.body.continuationToken, undefined);
});
