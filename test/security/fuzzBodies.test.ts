import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import slugid from 'slugid';
import { apiEndpoints } from '../../src/processes/api.js';
import { compile } from '../../src/api/validate.js';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { databaseCounts } from '../helpers/dbState.js';
import { sampleOf } from '../helpers/schemaSample.js';
import { assertAnswered, assertNoPrototypePollution, fuzzParameters, hostileKey, hostileString, hostileValue } from '../helpers/fuzz.js';

/*
 * Every other endpoint that takes a JSON body (claims, reports, artifacts, clients, graph actions), from the
 * list the API serves: a valid body sampled from the endpoint's schema, then mutated (wrong types, hostile
 * strings and keys, deep nesting, the whole body replaced), sent with root credentials to real resources.
 * Never a 5xx; a refusal is Taskcluster's shape and writes nothing. createTask and createTaskGraph have
 * their own fuzzers (fuzzTasks, fuzzGraphs).
 */

let t: TestApi;
const values: Record<string, string> = {};
before(async () => {
  // no Temporal here: an action that would reach it fails fast instead of waiting for a server
  t = await startTestApi({ claimWorkWaitMs: 100, temporalAddress: '127.0.0.1:1' });
  const taskId = slugid.nice();
  const ok = (res: { status: number; body: unknown }) => assert.ok(res.status < 400, JSON.stringify(res.body));
  ok(await t.request('PUT', `/api/queue/v1/task/${taskId}`, { ...fastTask('bodies'), workerType: 'fuzz-bodies' }));
  ok(await t.request('POST', '/api/queue/v1/claim-work/tgs-test/fuzz-bodies', { workerGroup: 'g', workerId: 'w', tasks: 1 }));
  ok(await t.request('PUT', '/api/auth/v1/clients/fuzz%2Fbodies', { description: 'bodies', expires: new Date(Date.now() + 3600_000).toISOString(), scopes: [] }));
  ok(await t.request('PUT', '/api/auth/v1/roles/fuzz%3Abodies', { description: 'bodies', scopes: ['queue:ping'] }));
  // a hook (no schedule: no Temporal here) whose role may create its task, so a valid trigger succeeds
  ok(await t.request('PUT', '/api/auth/v1/roles/hook-id%3Afuzz%2F*', { description: 'bodies', scopes: ['queue:create-task:lowest:tgs-test/fast', 'queue:scheduler-id:-'] }));
  ok(await t.request('PUT', '/api/hooks/v1/hooks/fuzz/bodies%2Fhook', hookBody()));
  const { body: token } = await t.request('GET', '/api/hooks/v1/hooks/fuzz/bodies%2Fhook/token');
  Object.assign(values, {
    taskId,
    taskGroupId: taskId,
    runId: '0',
    name: 'private/fuzz/body.txt',
    clientId: 'fuzz%2Fbodies',
    provisionerId: 'tgs-test',
    workerType: 'fuzz-bodies',
    taskQueueId: 'tgs-test%2Ffuzz-bodies',
    // the worker that claimed the task
    workerGroup: 'g',
    workerId: 'w',
    roleId: 'fuzz%3Abodies',
    taskGraphId: slugid.nice(),
    taskIdOrLabel: 'build',
    indexPath: 'fuzz.bodies.a',
    namespace: 'fuzz.bodies.a',
    hookGroupId: 'fuzz',
    hookId: 'bodies%2Fhook',
    token: token.token,
    cacheTier: 'default',
    cacheName: 'fuzz',
    cacheKey: 'f'.repeat(64),
  });
});
after(async () => {
  await t?.close();
});

const OWN_FUZZERS = new Set(['queue.createTask', 'scheduler.createTaskGraph']);
const withBodies = apiEndpoints.filter((e) => e.input && !e.rawBody && !OWN_FUZZERS.has(`${e.service}.${e.name}`));
const routeParams = (route: string) => [...route.matchAll(/<([a-zA-Z]+)\*?>/g)].map((m) => m[1]);

const hookBody = () => ({ metadata: { name: 'fuzz', description: 'bodies', owner: 'fuzz@example.com' }, task: fastTask('hook') });

/** Valid bodies where the schema's smallest value is not one (a graph extension needs a task). */
const VALID: Record<string, () => unknown> = {
  // an owner is an email address
  'hooks.createHook': hookBody,
  'hooks.updateHook': hookBody,
  'scheduler.extendTaskGraph': () => ({ tasks: { more: { task: fastTask('more') } } }),
  // an uploadId is a v4 slugid
  'queue.finishArtifact': () => ({ uploadId: slugid.v4() }),
  // a taskId is a slugid
  'index.insertTask': () => ({ taskId: values.taskId, rank: 0, data: {}, expires: new Date(Date.now() + 3600_000).toISOString() }),
  // the claimed run (at least one item)
  'queue.reportResolutions': () => ({ resolutions: [{ taskId: values.taskId, runId: 0, outcome: 'completed' }] }),
};

/** Endpoints whose refusal after the body was accepted is recorded (docs/formats.md § Hooks). */
const RECORDS_REFUSALS = new Set(['hooks.triggerHook', 'hooks.triggerHookWithToken']);

/** Replace the value of an existing key (the `index`-th, at the end of `path`), add a key, or replace the body. */
type Mutation = { path: string[]; index: number; value: unknown } | { path: string[]; key: string; value: unknown } | { whole: unknown };

const PATH = fc.array(fc.constantFrom('tasks', 'more', 'task', 'payload', 'metadata', '0'), { maxLength: 3 });
const mutation: fc.Arbitrary<Mutation> = fc.oneof(
  { arbitrary: fc.record({ path: PATH, index: fc.nat(), value: fc.oneof(hostileValue, hostileString) }), weight: 4 },
  { arbitrary: fc.record({ path: PATH, key: hostileKey, value: hostileValue }), weight: 1 },
  { arbitrary: fc.record({ whole: hostileValue }), weight: 1 },
);

function mutate(body: unknown, m: Mutation): unknown {
  if ('whole' in m) return m.whole;
  let parent = body as Record<string, unknown>;
  for (const step of m.path) {
    const next = parent?.[step];
    if (next === null || typeof next !== 'object') break;
    parent = next as Record<string, unknown>;
  }
  if (parent === null || typeof parent !== 'object') return body;
  const keys = Object.keys(parent);
  const key = 'key' in m ? m.key : keys.length > 0 ? keys[m.index % keys.length] : 'x';
  Object.defineProperty(parent, key, { value: m.value, enumerable: true, writable: true, configurable: true });
  return body;
}

test('every endpoint with a JSON body: mutated bodies never crash, refusals write nothing', async (ctx) => {
  assert.ok(withBodies.length >= 6, withBodies.map((e) => e.name).join(', '));
  const statuses = new Map<string, number>();
  const endpoints = withBodies.map((e) => ({ service: e.service, name: e.name }));
  await fc.assert(
    fc.asyncProperty(fc.constantFrom(...endpoints), fc.array(mutation, { maxLength: 2 }), async ({ service, name }, mutations) => {
      const e = withBodies.find((x) => x.service === service && x.name === name)!;
      const valid = VALID[`${service}.${name}`]?.() ?? sampleOf(e.input!);
      assert.ok(compile(e.input!)(structuredClone(valid)), `${service}.${name}: no valid body to mutate`);
      const body = mutations.reduce(mutate, valid);
      let path = e.route;
      for (const p of routeParams(e.route)) {
        assert.ok(p in values, `${service}.${name}: no value for route parameter <${p}>`);
        path = path.replace(new RegExp(`<${p}\\*?>`), values[p]);
      }
      // the worker recorder writes what claims noted up to 2 s later (src/queue/workers.ts), the group announcer
      // a resolved group's message 50 ms after the report (src/queue/groupAnnouncer.ts): flushed first, so the
      // counts after a refusal show what that request wrote, noted sightings included
      await t.api.deps.workers.flush();
      await t.api.deps.groupAnnouncer.flush();
      const before = await databaseCounts(t.db.pool);
      const res = await t.request(e.method.toUpperCase(), `/api/${service}/v1${path}`, JSON.stringify(body) ?? 'null');
      const what = `${service}.${name}`;
      assertAnswered(res, what);
      assertNoPrototypePollution(what);
      if (res.status >= 400) await t.api.deps.workers.flush();
      if (res.status >= 400) {
        const after = await databaseCounts(t.db.pool);
        // A fire refused after the payload was accepted (the template fails, the hook's role lacks scopes: the hook
        // may have been changed by a fuzzed updateHook) is recorded in the hook's last fires, as Taskcluster does;
        // that row and nothing else.
        if (RECORDS_REFUSALS.has(what) && Number(after.hook_last_fires) === Number(before.hook_last_fires) + 1) after.hook_last_fires = before.hook_last_fires;
        assert.deepEqual(after, before, `${what}: a refused request wrote something`);
      }
      statuses.set(`${name} ${res.status}`, (statuses.get(`${name} ${res.status}`) ?? 0) + 1);
    }),
    fuzzParameters(400),
  );
  ctx.diagnostic(JSON.stringify(Object.fromEntries([...statuses].sort())));
});

test('every endpoint that takes a body, or refuses one at once, answers JSON nested up to 100,000 levels with a 4xx', async () => {
  // (fastify reads no body on a GET)
  const routes = apiEndpoints.filter((e) => e.method !== 'get').flatMap((e) => [e.route, ...(e.aliases ?? [])].map((route) => ({ e, route })));
  const texts = [30_000, 100_000].flatMap((depth) => ['['.repeat(depth) + ']'.repeat(depth), '{"a":'.repeat(depth) + '1' + '}'.repeat(depth)]);
  let answered = 0;
  for (const { e, route } of routes) {
    let path = route;
    for (const p of routeParams(route)) {
      assert.ok(p in values, `${e.service}.${e.name}: no value for route parameter <${p}>`);
      path = path.replace(new RegExp(`<${p}\\*?>`), values[p]);
    }
    for (const text of texts) {
      for (const credentials of [undefined, null] as const) {
        const res = await t.request(e.method.toUpperCase(), `/api/${e.service}/v1${path}`, text, credentials);
        const what = `${e.service}.${e.name} ${route} with ${text.length} characters of nesting ${credentials === null ? 'anonymously' : 'as root'}`;
        assertAnswered(res, what);
        assert.ok(res.status >= 400 && res.status < 500, `${what}: ${res.status} ${JSON.stringify(res.body).slice(0, 300)}`);
        assert.ok(JSON.stringify(res.body).length < 10_000, `${what}: the reply echoes at most a few KB`);
        answered++;
      }
    }
  }
  assert.ok(routes.length >= 20 && answered === routes.length * 8, `${answered} answers on ${routes.length} routes`);
});
