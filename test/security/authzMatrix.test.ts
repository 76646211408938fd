import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import slugid from 'slugid';
import { apiEndpoints } from '../../src/processes/api.js';
import type { Endpoint } from '../../src/api/endpoint.js';
import { expressionSatisfied, renderExpression, templateParameters } from '../../src/auth/scopes.js';
import { compile, describeErrors } from '../../src/api/validate.js';
import { eventually } from '../../support/stack.js';
import { fastTask } from '../../support/graphs.js';
import type { Credentials } from '../../support/api.js';
import { databaseFingerprint, databaseSettled } from '../helpers/dbState.js';
import { sampleOf } from '../helpers/schemaSample.js';
import { taskQuery } from '../../src/workflows/contract.js';
import { useStack } from '../helpers/stackFixture.js';

/*
 * The authorization matrix, generated from the endpoint declarations the API is built from: every endpoint
 * that declares scopes is called anonymously and by a client without scopes, on real resources (a claimed
 * task with an uploaded private artifact, an unscheduled task of a running graph, a client), and must answer
 * 403 InsufficientScopes in Taskcluster's error shape (no credentials is the anonymous role, as in Taskcluster) without changing a row. A control call with root credentials on
 * fresh resources shows each endpoint would have succeeded, so the refusals are about scopes.
 *
 * Every request holds `assume:anonymous`, and the `anonymous` role grants the queue's reads by default: the
 * matrix empties that role, so no endpoint with scopes is left out, and a last test puts the default back and
 * checks that exactly the endpoints whose scopes the role grants answer anonymous callers.
 */

const stack = useStack({ configOverrides: { claimWorkWaitMs: 200 } });
let noScopes: Credentials;
/** The `anonymous` role as the migrations made it. */
let anonymousRole: { description: string; scopes: string[] };
stack.onStart(async () => {
  const clientId = `matrix/no-scopes-${randomBytes(4).toString('hex')}`;
  const res = await call('PUT', `/api/auth/v1/clients/${encodeURIComponent(clientId)}`, { description: 'no scopes', expires: inDays(1), scopes: [] });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  noScopes = { clientId, accessToken: res.body.accessToken };
  const role = await call('GET', '/api/auth/v1/roles/anonymous');
  assert.equal(role.status, 200, JSON.stringify(role.body));
  anonymousRole = { description: role.body.description, scopes: role.body.scopes };
  assert.ok(anonymousRole.scopes.length > 0, 'the default anonymous role grants something');
  await setAnonymousScopes([]);
});

const inDays = (n: number) => new Date(Date.now() + n * 24 * 3600 * 1000).toISOString();
const call = (method: string, path: string, body?: unknown, credentials?: Credentials | null) => stack.api.request(method, path, body, credentials);
function ok(res: { status: number; body: unknown }, what: string) {
  assert.ok(res.status < 400, `${what}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body as any;
}

const ARTIFACT = 'private/matrix/log.txt';

/**
 * The database's fingerprint once the API's worker recorder wrote what claims noted (it writes up to 2 s
 * later, src/queue/workers.ts): a change after that is the refused call's.
 */
async function fingerprint(settle = false) {
  await stack.api.api.deps.workers.flush();
  return settle ? databaseSettled(stack.api.db.pool) : databaseFingerprint(stack.api.db.pool);
}

/** Makes every resource a route can name, before the database is fingerprinted. */
async function build(world: World) {
  await world.claimedTask();
  await world.runningGraph();
  await world.existingClient();
  await world.sealedGroup();
  await world.existingRole();
  await world.indexedTask();
  await world.existingHook();
}

/** Sets the `anonymous` role's scopes (as root, through the auth API) and checks an anonymous caller holds them. */
async function setAnonymousScopes(scopes: string[]) {
  ok(await call('POST', '/api/auth/v1/roles/anonymous', { description: anonymousRole.description, scopes }), 'update the anonymous role');
  const expanded = ok(await call('POST', '/api/auth/v1/scopes/expand', { scopes: ['assume:anonymous'] }), 'expand assume:anonymous');
  assert.deepEqual(
    (expanded.scopes as string[]).filter((s) => s !== 'assume:anonymous').sort(),
    [...scopes].sort(),
    'assume:anonymous expands to exactly the role',
  );
}

/** Resources for the calls; each made on first use, so a control call builds only what its route names. */
class World {
  readonly id = randomBytes(3).toString('hex');
  readonly provisionerId = 'tgs-matrix';
  readonly workerType = `mx-${this.id}`;
  private claimed?: Promise<{ taskId: string; taskGroupId: string }>;
  private graph?: Promise<{ taskGraphId: string; doneLabel: string; unscheduledTaskId: string }>;
  private client?: Promise<string>;
  private sealed?: Promise<string>;
  private role?: Promise<string>;
  private indexed?: Promise<string>;
  private hook?: Promise<{ hookId: string; token: string }>;
  private cacheEntry?: Promise<{ name: string; key: string }>;

  /** A task claimed by a worker (run 0 running) with a private `s3` artifact whose bytes are uploaded. */
  claimedTask() {
    return (this.claimed ??= (async () => {
      const taskId = slugid.nice();
      ok(await call('PUT', `/api/queue/v1/task/${taskId}`, { ...fastTask('matrix'), provisionerId: this.provisionerId, workerType: this.workerType }), 'create task');
      const claim = ok(await call('POST', `/api/queue/v1/claim-work/${this.provisionerId}/${this.workerType}`, { workerGroup: 'matrix', workerId: 'w', tasks: 1 }), 'claim');
      assert.equal(claim.tasks.length, 1, 'the task was claimed');
      const artifact = ok(
        await call('POST', `/api/queue/v1/task/${taskId}/runs/0/artifacts/${ARTIFACT}`, { storageType: 's3', contentType: 'text/plain', expires: inDays(1) }),
        'create artifact',
      );
      const put = await fetch(artifact.putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'matrix' });
      assert.equal(put.status, 200, 'artifact uploaded');
      return { taskId, taskGroupId: taskId };
    })());
  }

  /** The running graph's file, made anew (its tasks' `created` moves: amending the graph with it changes metadata only). */
  graphFile() {
    const task = (name: string, workerType: string) => ({ ...fastTask(name), provisionerId: this.provisionerId, workerType });
    return {
      routing: 'matrix',
      tasks: {
        // cached, so the cache's calls have a key and an entry to read and purge
        done: { cache: { name: `matrix-${this.id}` }, task: task('done', `md-${this.id}`) },
        gate: { task: task('gate', `mg-${this.id}`) },
        waiting: { requires: ['gate'], task: task('waiting', `mg-${this.id}`) },
      },
    };
  }

  /**
   * A running graph: `done` completed (so it can be rerun), `waiting` unscheduled behind `gate`, which stays
   * pending (nobody claims its worker type).
   */
  runningGraph() {
    return (this.graph ??= (async () => {
      const taskGraphId = slugid.nice();
      const created = ok(await call('PUT', `/api/scheduler/v1/task-graph/${taskGraphId}`, this.graphFile()), 'create graph');
      const taskIdOf = (label: string) => (created.tasks as { label: string; taskId: string }[]).find((t) => t.label === label)!.taskId;
      await eventually(async () => {
        const claim = ok(await call('POST', `/api/queue/v1/claim-work/${this.provisionerId}/md-${this.id}`, { workerGroup: 'matrix', workerId: 'w', tasks: 1 }), 'claim');
        return claim.tasks.length === 1;
      }, 'the graph scheduled `done`');
      ok(await call('POST', `/api/queue/v1/task/${taskIdOf('done')}/runs/0/completed`), 'report done');
      const handle = stack.client.workflow.getHandle(`task-graph/${taskGraphId}`);
      await eventually(async () => (await handle.query(taskQuery, { label: 'done' })).state === 'completed', 'the workflow saw `done` complete');
      return { taskGraphId, doneLabel: 'done', unscheduledTaskId: taskIdOf('waiting') };
    })());
  }

  /** The cache entry `done`'s completion wrote (docs/formats.md § Cached tasks): its name and key. */
  cachedEntry() {
    return (this.cacheEntry ??= (async () => {
      const { taskGraphId } = await this.runningGraph();
      const { key } = ok(await call('GET', `/api/scheduler/v1/task-graph/${taskGraphId}/cache/done`), 'why done');
      const name = `matrix-${this.id}`;
      await eventually(async () => (await call('GET', `/api/index/v1/task/tgs.cache.default.${name}.${key}`)).status === 200, 'the cache entry indexed');
      return { name, key };
    })());
  }

  /** A sealed task group holding one pending task (cancelTaskGroup cancels only sealed groups). */
  sealedGroup() {
    return (this.sealed ??= (async () => {
      const taskId = slugid.nice();
      ok(await call('PUT', `/api/queue/v1/task/${taskId}`, { ...fastTask('sealed'), provisionerId: this.provisionerId, workerType: `ms-${this.id}` }), 'create task');
      ok(await call('POST', `/api/queue/v1/task-group/${taskId}/seal`), 'seal group');
      return taskId;
    })());
  }

  /** An index entry (root's insertTask) pointing at the claimed task, which holds the private artifact. */
  indexedTask() {
    return (this.indexed ??= (async () => {
      const indexPath = `matrix.${this.id}.task`;
      const taskId = (await this.claimedTask()).taskId;
      ok(await call('PUT', `/api/index/v1/task/${indexPath}`, { taskId, rank: 0, data: {}, expires: inDays(1) }), 'index the task');
      return indexPath;
    })());
  }

  existingRole() {
    return (this.role ??= (async () => {
      const roleId = `matrix-existing-${this.id}`;
      ok(await call('PUT', `/api/auth/v1/roles/${encodeURIComponent(roleId)}`, { description: 'existing', scopes: ['queue:ping'] }), 'create role');
      return roleId;
    })());
  }

  /** A hook of the group `matrix-hooks` that fired once (its role may create its task), and its trigger token. */
  existingHook() {
    return (this.hook ??= (async () => {
      const hookId = `existing-${this.id}`;
      ok(await call('PUT', `/api/auth/v1/roles/${segment(`hook-id:${HOOK_GROUP}/*`)}`, { description: 'matrix hooks', scopes: [`queue:create-task:lowest:tgs-matrix/mh-${'*'}`, 'queue:scheduler-id:-'] }), 'create hook role');
      ok(await call('PUT', `/api/hooks/v1/hooks/${HOOK_GROUP}/${hookId}`, hookBody(this.id)), 'create hook');
      ok(await call('POST', `/api/hooks/v1/hooks/${HOOK_GROUP}/${hookId}/trigger`, {}), 'trigger hook');
      const { token } = ok(await call('GET', `/api/hooks/v1/hooks/${HOOK_GROUP}/${hookId}/token`), 'get trigger token');
      return { hookId, token };
    })());
  }

  existingClient() {
    return (this.client ??= (async () => {
      const clientId = `matrix/existing-${this.id}`;
      ok(await call('PUT', `/api/auth/v1/clients/${encodeURIComponent(clientId)}`, { description: 'existing', expires: inDays(1), scopes: ['queue:ping'] }), 'create client');
      return clientId;
    })());
  }
}

const HOOK_GROUP = 'matrix-hooks';
/** A hook whose task the `hook-id:matrix-hooks/*` role may create. */
const hookBody = (id: string) => ({
  metadata: { name: 'matrix', description: 'matrix hook', owner: 'matrix@example.com' },
  // a schedule, so backfillHook has times to fire (New Year's midnight: none while the test runs)
  schedule: ['0 0 1 1 *'],
  task: { ...fastTask('matrix-hook'), provisionerId: 'tgs-matrix', workerType: `mh-${id}` },
});

interface Candidate {
  /** The value, URL-encoded for the route. */
  value: (w: World) => Promise<string>;
  /** False for values naming nothing yet (a new taskId for createTask): a 404 is an answer too. */
  exists: boolean;
}
const existing = (value: (w: World) => Promise<string>): Candidate => ({ value, exists: true });
const fresh = (value: () => string): Candidate => ({ value: async () => value(), exists: false });
const segment = encodeURIComponent;

/**
 * Route parameter name → the values to try. A parameter missing here fails the test by name: a new
 * endpoint's parameter needs a resource before the matrix can cover it.
 */
const PARAMS: Record<string, Candidate[]> = {
  taskId: [
    existing(async (w) => (await w.claimedTask()).taskId),
    existing(async (w) => (await w.runningGraph()).unscheduledTaskId),
    fresh(() => slugid.nice()),
  ],
  taskGroupId: [
    existing(async (w) => (await w.claimedTask()).taskGroupId),
    existing(async (w) => w.sealedGroup()),
    existing(async (w) => (await w.runningGraph()).taskGraphId),
  ],
  runId: [existing(async () => '0')],
  name: [existing(async () => ARTIFACT.split('/').map(segment).join('/'))],
  // the task queue, and the worker, of the world's claimed task (a queue or worker exists once used)
  provisionerId: [existing(async (w) => (await w.claimedTask(), w.provisionerId))],
  workerType: [existing(async (w) => (await w.claimedTask(), w.workerType))],
  taskQueueId: [existing(async (w) => (await w.claimedTask(), segment(`${w.provisionerId}/${w.workerType}`)))],
  workerGroup: [existing(async (w) => (await w.claimedTask(), 'matrix'))],
  workerId: [existing(async (w) => (await w.claimedTask(), 'w'))],
  clientId: [existing(async (w) => segment(await w.existingClient())), fresh(() => segment(`matrix/new-${randomBytes(4).toString('hex')}`))],
  // the audit history of the world's client (its creation wrote a row)
  entityType: [existing(async () => 'client')],
  entityId: [existing(async (w) => segment(await w.existingClient()))],
  roleId: [existing(async (w) => segment(await w.existingRole())), fresh(() => segment(`matrix-new-${randomBytes(4).toString('hex')}`))],
  taskGraphId: [existing(async (w) => (await w.runningGraph()).taskGraphId), fresh(() => slugid.nice())],
  indexPath: [existing(async (w) => w.indexedTask())],
  // an entry's path (insert replaces it, delete removes it, the lists list nothing under it), its namespace, a new path
  namespace: [
    existing(async (w) => w.indexedTask()),
    existing(async (w) => (await w.indexedTask()).replace(/\.task$/, '')),
    fresh(() => `matrix.new.${randomBytes(4).toString('hex')}`),
  ],
  hookGroupId: [existing(async (w) => (await w.existingHook(), HOOK_GROUP))],
  hookId: [existing(async (w) => segment((await w.existingHook()).hookId)), fresh(() => segment(`new/${randomBytes(4).toString('hex')}`))],
  token: [existing(async (w) => (await w.existingHook()).token)],
  cacheTier: [existing(async () => 'default')],
  cacheName: [existing(async (w) => (await w.cachedEntry()).name)],
  cacheKey: [existing(async (w) => (await w.cachedEntry()).key)],
  taskIdOrLabel: [existing(async (w) => (await w.runningGraph()).doneLabel), existing(async (w) => (await w.runningGraph()).unscheduledTaskId)],
};

/** Bodies that would be accepted, by `service.name`; other endpoints with an input get one sampled from its schema. */
const BODIES: Record<string, (w: World) => unknown> = {
  // the world's claimed run (made with the world's other resources, before any fingerprint)
  'queue.reportResolutions': async (w) => ({ resolutions: [{ taskId: (await w.claimedTask()).taskId, runId: 0, outcome: 'completed' }] }),
  'queue.createTask': () => fastTask('matrix-new'),
  'queue.claimWork': () => ({ workerGroup: 'matrix', workerId: 'w', tasks: 1 }),
  'queue.reportException': () => ({ reason: 'worker-shutdown' }),
  'queue.createArtifact': () => ({ storageType: 's3', contentType: 'text/plain', expires: inDays(1) }),
  'auth.createClient': () => ({ description: 'matrix', expires: inDays(1), scopes: [] }),
  'auth.updateClient': () => ({ description: 'matrix, updated', expires: inDays(2) }),
  'auth.createRole': () => ({ description: 'matrix', scopes: [] }),
  'auth.updateRole': () => ({ description: 'matrix, updated', scopes: [] }),
  // with properties (the matrix also sends every write an empty body, which needs the scope for every property)
  'queue.declareProvisioner': () => ({ description: 'matrix', stability: 'experimental' }),
  'queue.declareWorkerType': () => ({ description: 'matrix', stability: 'experimental' }),
  'queue.declareWorker': () => ({ expires: inDays(1) }),
  'queue.quarantineWorker': () => ({ quarantineUntil: inDays(1) }),
  'queue.finishArtifact': () => ({ uploadId: slugid.v4() }),
  'index.insertTask': () => ({ taskId: slugid.nice(), rank: 0, data: {}, expires: inDays(1) }),
  'index.findTasksAtIndex': async (w) => ({ indexes: [await w.indexedTask()] }),
  'hooks.createHook': (w) => hookBody(w.id),
  'hooks.updateHook': (w) => hookBody(w.id),
  'hooks.triggerHook': () => ({}),
  'hooks.backfillHook': () => ({ start: new Date(Date.now() - 2 * 86400_000).toISOString(), end: new Date(Date.now() - 86400_000).toISOString() }),
  'scheduler.createTaskGraph': () => ({ routing: 'matrix', tasks: { one: { task: fastTask('one') } } }),
  'scheduler.extendTaskGraph': () => ({ tasks: { more: { requires: ['done'], task: fastTask('more') } } }),
  'scheduler.amendTaskGraph': (w) => w.graphFile(),
  'queue.tasks': async (w) => ({ taskIds: [(await w.claimedTask()).taskId] }),
  'queue.statuses': async (w) => ({ taskIds: [(await w.claimedTask()).taskId] }),
};

/**
 * Reads of the tasks their body names (Taskcluster's batch reads): their scopes are one per taskId of the body, so
 * they are POSTs that write nothing, and an empty list needs no scope and is answered, empty, to anyone (as
 * Taskcluster answers it; taskgraph asks with an empty list when no task was found in the index).
 */

/**
 * Endpoints whose every call is refused after authorization, with the refusal that shows it got that far: tgs
 * stores no `object` artifacts, so finishArtifact has nothing to finish.
 */
const AUTHORIZED_REFUSALS: Record<string, { status: number; message: RegExp }> = {
  'queue.finishArtifact': { status: 400, message: /^Only object artifacts can be finished/ },
  // the matrix sends plain requests: authorized, the stream asks for the upgrade (test/queue/workerStream.test.ts opens it)
  'queue.workerStream': { status: 400, message: /^workerStream is a WebSocket/ },
  // authorized, a fresh graph's running workflow has nothing to resume (test/e2e/temporalButtons.test.ts resumes a terminated one)
  'scheduler.resumeTaskGraph': { status: 409, message: /its workflow task-graph\/\S+ is still running: there is nothing to resume$/ },
};

const key = (e: Endpoint) => `${e.service}.${e.name}`;

/**
 * Reads that take a body: the scope parameters the body names (so whether the `anonymous` role grants one is
 * computed as for a route's), and the answer to the empty body, which names nothing to read and so needs no scope
 * (findTasksAtIndex without indexes answers no tasks, as Taskcluster's does).
 */
const READS_WITH_BODY: Record<string, { params: (body: any) => Record<string, unknown>; emptyAnswer: unknown }> = {
  'index.findTasksAtIndex': { params: (body) => ({ indexPaths: body.indexes }), emptyAnswer: { tasks: [] } },
  // a batch read's scopes name the taskIds of its body; an empty list names no task and is answered empty, as Taskcluster does
  'queue.tasks': { params: (body) => ({ taskIds: body.taskIds }), emptyAnswer: { tasks: [] } },
  'queue.statuses': { params: (body) => ({ taskIds: body.taskIds }), emptyAnswer: { statuses: [] } },
};

async function bodyFor(e: Endpoint, w: World): Promise<unknown> {
  if (!e.input || e.rawBody) return undefined;
  const body = (await BODIES[key(e)]?.(w)) ?? sampleOf(e.input);
  const validate = compile(e.input);
  assert.ok(
    validate(structuredClone(body)),
    `${key(e)}: the matrix has no valid body for this endpoint (${describeErrors(validate.errors)}); add one to BODIES`,
  );
  return body;
}

const routeParams = (route: string) => [...route.matchAll(/<([a-zA-Z]+)\*?>/g)].map((m) => m[1]);

/** Every combination of candidates for the route's parameters. */
function combinations(route: string): Candidate[][] {
  let combos: Candidate[][] = [[]];
  for (const param of routeParams(route)) {
    const candidates = PARAMS[param];
    assert.ok(candidates, `route ${route} has parameter <${param}>, which the matrix cannot fill: add it to PARAMS`);
    combos = combos.flatMap((combo) => candidates.map((c) => [...combo, c]));
  }
  return combos;
}

async function pathFor(e: Endpoint, route: string, combo: Candidate[], w: World): Promise<string> {
  let path = route;
  const names = routeParams(route);
  for (let i = 0; i < names.length; i++) path = path.replace(new RegExp(`<${names[i]}\\*?>`), await combo[i].value(w));
  return `/api/${e.service}/v1${path}`;
}

const scoped = apiEndpoints.filter((e) => e.scopes !== undefined);

/**
 * The endpoints anyone may call whatever the `anonymous` role holds: the services' liveness and version, the
 * artifact bytes behind a signed URL and a hook fired with its trigger token (the signature, the token, is the
 * credential). Every other endpoint declares scopes, so emptying the role closes every read.
 */
const UNSCOPED = new Set([
  'ping',
  'lbheartbeat',
  'heartbeat',
  'version',
  'uploadArtifactData',
  'downloadArtifactData',
  'claimTask',
  'triggerHookWithToken',
  // Taskcluster's: the answer about another request's credentials, and the test endpoints of the fixed test client
  'authenticateHawk',
  'testAuthenticate',
  'testAuthenticateGet',
]);

test('every endpoint declares scopes but the services\' liveness, signed artifact URLs, trigger tokens, the refused claimTask and Taskcluster\'s authenticateHawk and test endpoints', () => {
  const unscoped = apiEndpoints.filter((e) => e.scopes === undefined).map((e) => `${e.service}.${e.name}`);
  assert.deepEqual(unscoped.filter((k) => !UNSCOPED.has(k.split('.')[1])), [], 'endpoints without scopes');
});

test('the matrix covers every endpoint that declares scopes, and its routes', () => {
  assert.ok(scoped.length >= 20, `only ${scoped.length} endpoints with scopes: is the list the app serves?`);
  for (const e of scoped) for (const route of [e.route, ...(e.aliases ?? [])]) assert.ok(combinations(route).length > 0);
});

test('every endpoint with scopes refuses anonymous and scope-less callers, and changes nothing', async (t) => {
  const world = new World();
  await build(world);
  const before = await fingerprint(true);
  let calls = 0;
  for (const e of scoped) {
    for (const route of [e.route, ...(e.aliases ?? [])]) {
      for (const combo of combinations(route)) {
        const path = await pathFor(e, route, combo, world);
        // the minimal valid body, and for every write also the empty body: no write may need fewer scopes for less
        const bodies: { body: unknown; empty: boolean }[] = [{ body: await bodyFor(e, world), empty: false }];
        if (e.method !== 'get' && !e.rawBody) bodies.push({ body: {}, empty: true });
        for (const { body, empty } of bodies) {
          for (const [who, credentials, status, code] of [
            ['anonymous', null, 403, 'InsufficientScopes'],
            ['a client without scopes', noScopes, 403, 'InsufficientScopes'],
          ] as const) {
            const res = await call(e.method.toUpperCase(), path, body, credentials);
            calls++;
            const what = `${key(e)} ${e.method.toUpperCase()} ${path} as ${who}${empty ? ' with an empty body' : ''}`;
            if (empty && READS_WITH_BODY[key(e)] && res.status === 200) {
              assert.deepEqual(res.body, READS_WITH_BODY[key(e)].emptyAnswer, `${what}: reads nothing`);
              continue;
            }
            // an empty body may also be refused as invalid (400) before the scopes it would need are known
            const refused = res.status === status || (res.status === 404 && combo.some((c) => !c.exists)) || (empty && res.status === 400);
            assert.ok(refused, `${what}: expected ${status}, got ${res.status} ${JSON.stringify(res.body)}`);
            assert.equal(typeof res.body?.code, 'string', `${what}: Taskcluster's error shape`);
            assert.equal(typeof res.body?.message, 'string', `${what}: Taskcluster's error shape`);
            if (res.status === status) assert.equal(res.body.code, code, what);
          }
        }
        assert.deepEqual(await fingerprint(), before, `${key(e)} ${path}: a refused call changed the database`);
      }
    }
  }
  assert.ok(calls >= 2 * scoped.length);
  t.diagnostic(`${calls} refused calls on ${scoped.length} endpoints`);
});

test('with root credentials each of those calls succeeds on fresh resources (the refusals were about scopes)', async () => {
  for (const e of scoped) {
    for (const route of [e.route, ...(e.aliases ?? [])]) {
      const answers: string[] = [];
      let succeeded = false;
      for (const combo of combinations(route)) {
        const world = new World();
        const path = await pathFor(e, route, combo, world);
        const res = await call(e.method.toUpperCase(), path, await bodyFor(e, world));
        answers.push(`${path}: ${res.status} ${res.status >= 400 ? res.body?.message : ''}`);
        const refusal = AUTHORIZED_REFUSALS[key(e)];
        succeeded = refusal ? res.status === refusal.status && refusal.message.test(res.body?.message) : res.status < 400;
        if (succeeded) break;
      }
      assert.ok(succeeded, `${key(e)} ${route} never succeeded with root credentials:\n${answers.join('\n')}`);
    }
  }
});

test('with the default anonymous role, exactly the endpoints whose scopes it grants answer anonymous callers', async (t) => {
  await setAnonymousScopes(anonymousRole.scopes);
  const world = new World();
  await build(world);
  const before = await fingerprint(true);
  const answered: string[] = [];
  for (const e of scoped) {
    for (const route of [e.route, ...(e.aliases ?? [])]) {
      const names = routeParams(route);
      const combo = combinations(route).find((c) => c.every((candidate) => candidate.exists))!;
      const params: Record<string, unknown> = {};
      for (let i = 0; i < names.length; i++) params[names[i]] = decodeURIComponent(await combo[i].value(world));
      // a taskQueueId route stands for provisionerId/workerType (Taskcluster's two forms of one queue)
      if (typeof params.taskQueueId === 'string') [params.provisionerId, params.workerType] = params.taskQueueId.split('/');
      const body = await bodyFor(e, world);
      Object.assign(params, READS_WITH_BODY[key(e)]?.params(body));
      const needed = [...templateParameters(e.scopes!)];
      // Scopes that depend on the body or the stored task (createTask's, a task's schedulerId) are not the role's
      // business: the role grants nothing that is not a read named by its route (or a batch read's body).
      const grants = needed.every((p) => p in params) && expressionSatisfied(anonymousRole.scopes, renderExpression(e.scopes!, params));
      const path = await pathFor(e, route, combo, world);
      const res = await call(e.method.toUpperCase(), path, body, null);
      const what = `${key(e)} ${e.method.toUpperCase()} ${path} anonymously`;
      if (grants) {
        assert.ok(e.method === 'get' || READS_WITH_BODY[key(e)], `${what}: the anonymous role grants only reads`);
        assert.ok(res.status < 400, `${what}: the role grants it, got ${res.status} ${JSON.stringify(res.body)}`);
        answered.push(key(e));
      } else {
        assert.equal(res.status, 403, `${what}: the role does not grant it, got ${res.status} ${JSON.stringify(res.body)}`);
        assert.equal(res.body?.code, 'InsufficientScopes', what);
      }
    }
  }
  assert.deepEqual(await fingerprint(), before, 'anonymous calls changed the database');
  // the reads migration 016 gives anonymous callers, by name: the generated expectation above must agree
  for (const name of ['findTask', 'findTasksAtIndex', 'listNamespaces', 'listTasks']) assert.ok(answered.includes(`index.${name}`), `index.${name} answers anonymous callers`);
  for (const name of ['task', 'status', 'tasks', 'statuses', 'listTaskGroup', 'getTaskGroup', 'listDependentTasks', 'listArtifacts', 'listLatestArtifacts', 'pendingTasks', 'listTaskQueues', 'getTaskQueue', 'listProvisioners', 'getProvisioner', 'listWorkerTypes', 'getWorkerType']) {
    assert.ok(answered.includes(`queue.${name}`), `queue.${name} answers anonymous callers`);
  }
  // and the scheduler's reads that migration 023 gives them
  for (const name of ['status', 'info', 'inspect', 'inspectTask', 'listTaskGraphs', 'taskGraphNodes', 'taskGraphChanges']) {
    assert.ok(answered.includes(`scheduler.${name}`), `scheduler.${name} answers anonymous callers`);
  }
  t.diagnostic(`answered anonymously: ${[...new Set(answered)].join(', ')}`);
});
