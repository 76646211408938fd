import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
// The official client, unmodified, and the Index reference it ships: a client version with a new entry makes this fail.
import taskcluster from 'taskcluster-client';
import { NOT_SERVED } from '../../src/api/notServed.js';
import { indexEndpoints } from '../../src/indexService/api/index.js';
import type { DevServer } from '../../src/temporal/devServer.js';
import { hawkHeader, startTestApi, type Credentials, type TestApi } from '../../support/api.js';
import { startTestTemporal } from '../../support/temporal.js';
import { fastTask } from '../../support/graphs.js';
import { assertReferenceServed, recording, referenceEntries, refusedWith, type Client } from '../helpers/taskclusterReference.js';

const reference = referenceEntries('Index');

let t: TestApi;
let temporal: DevServer;
before(async () => {
  temporal = await startTestTemporal();
  t = await startTestApi({ temporalAddress: temporal.address });
});
after(async () => {
  await t?.close();
  await temporal?.stop();
});


test('every entry of the Index reference is served with its route, method and scopes, or listed in NOT_SERVED', () => {
  assertReferenceServed('Index', indexEndpoints, { scopes: true });
});

/** An Index client that records every method that answered. */
const recordingIndex = (exercised: Set<string>, credentials: unknown = t.root) =>
  recording(new taskcluster.Index({ rootUrl: t.rootUrl, credentials, retries: 0 }) as unknown as Client, exercised);

const refused = refusedWith;

/** A client of its own with exactly these scopes (made through the auth API). */
async function clientWith(scopes: string[]) {
  const auth = new taskcluster.Auth({ rootUrl: t.rootUrl, credentials: t.root, retries: 0 });
  const clientId = `project/index-ref-${slugid.nice()}`;
  const { accessToken } = await auth.createClient(clientId, { description: 'index reference test', expires: taskcluster.fromNowJSON('1 hour'), scopes });
  return { clientId, accessToken };
}

test('every Index entry answers through the official client as Taskcluster\'s does', async () => {
  const exercised = new Set<string>();
  const index = recordingIndex(exercised);
  const queue = new taskcluster.Queue({ rootUrl: t.rootUrl, credentials: t.root, retries: 0 }) as unknown as Client;
  const expires = taskcluster.fromNowJSON('1 hour');

  // --- service endpoints
  assert.equal((await index.ping()).alive, true);
  assert.deepEqual(await index.lbheartbeat(), {});
  assert.equal(typeof (await index.version()).version, 'string');
  assert.deepEqual(Object.keys(await index.heartbeat()).sort(), ['postgres', 'rabbitmq', 'temporal']);

  // --- a task with a public and a private artifact
  const taskId = slugid.nice();
  await queue.createTask(taskId, { ...fastTask('indexed'), provisionerId: 'tgs-ref', workerType: 'index' });
  await queue.claimWork('tgs-ref/index', { workerGroup: 'g', workerId: 'w', tasks: 1 });
  for (const name of ['public/build.txt', 'private/secret.txt']) {
    const made = await queue.createArtifact(taskId, 0, name, { storageType: 's3', contentType: 'text/plain', expires });
    assert.equal((await fetch(made.putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: `${name}\n` })).status, 200);
  }
  await queue.reportCompleted(taskId, 0);

  // --- insert, find, the rank rule
  const inserted = await index.insertTask('ref.project.latest', { taskId, rank: 3, data: { revision: 'abc' }, expires });
  assert.deepEqual(inserted, { namespace: 'ref.project.latest', taskId, rank: 3, data: { revision: 'abc' }, expires });
  const other = slugid.nice();
  assert.equal((await index.insertTask('ref.project.latest', { taskId: other, rank: 2, data: {}, expires })).taskId, taskId, 'a lower rank leaves the entry');
  assert.deepEqual(await index.findTask('ref.project.latest'), inserted);
  await refused(index.findTask('ref.project.nothing'), 404, 'ResourceNotFound');
  // taskgraph's batched lookup: an unknown path is absent from the answer
  assert.deepEqual((await index.findTasksAtIndex({ indexes: ['ref.project.nothing', 'ref.project.latest'] })).tasks, [inserted]);

  // --- lists, paged with continuationToken and limit
  for (const name of ['b', 'c', 'd', 'e']) await index.insertTask(`ref.project.${name}`, { taskId: other, rank: 0, data: { name }, expires });
  await index.insertTask('ref.other.x', { taskId: other, rank: 0, data: {}, expires });
  const listed: string[] = [];
  let pages = 0;
  for (let continuationToken: string | undefined; pages === 0 || continuationToken; pages++) {
    const page = await index.listTasks('ref.project', { limit: 2, ...(continuationToken ? { continuationToken } : {}) });
    listed.push(...page.tasks.map((x: { namespace: string }) => x.namespace));
    continuationToken = page.continuationToken;
  }
  assert.deepEqual(listed, ['b', 'c', 'd', 'e', 'latest'].map((n) => `ref.project.${n}`));
  assert.equal(pages, 3);
  const first = await index.listNamespaces('ref', { limit: 1 });
  assert.deepEqual(first.namespaces.map((n: { namespace: string; name: string }) => [n.namespace, n.name]), [['ref.other', 'other']]);
  const second = await index.listNamespaces('ref', { limit: 1, continuationToken: first.continuationToken });
  assert.deepEqual(second.namespaces.map((n: { namespace: string }) => n.namespace), ['ref.project']);
  assert.equal(second.continuationToken, undefined);
  assert.ok((await index.listNamespaces('')).namespaces.some((n: { namespace: string }) => n.namespace === 'ref'), 'the root lists its namespaces');
  assert.deepEqual((await index.listTasks('')).tasks, []);
  await refused(index.listTasks('ref', { continuationToken: 'AAAA' }), 400, 'InputError');

  // --- findArtifactFromTask: a 303 whose body is text, as Taskcluster's (express's res.redirect): the JS client
  // answers undefined for it, as it does against Taskcluster; the link, in Location, goes through the queue
  assert.equal(await index.findArtifactFromTask('ref.project.latest', 'public/build.txt'), undefined);
  const redirected = async (name: string, credentials?: Credentials) => {
    const url = `${t.rootUrl}/api/index/v1/task/ref.project.latest/artifacts/${name}`;
    const res = await fetch(url, { redirect: 'manual', headers: credentials ? { authorization: hawkHeader(url, 'GET', credentials) } : {} });
    assert.equal(res.status, 303, `${name}: ${res.status} ${await res.text()}`);
    return { url: res.headers.get('location') as string };
  };
  const pub = await redirected('public/build.txt', t.root);
  assert.equal(pub.url, `${t.rootUrl}/api/queue/v1/task/${taskId}/artifacts/public/build.txt`);
  const followed = await fetch(pub.url);
  assert.equal(followed.status, 200);
  assert.equal(await followed.text(), 'public/build.txt\n');
  const anonymous = await fetch(`${t.rootUrl}/api/index/v1/task/ref.project.latest/artifacts/public/build.txt`, { redirect: 'manual' });
  assert.equal(anonymous.status, 303, 'a public artifact needs no credentials');
  assert.equal(anonymous.headers.get('location'), pub.url);

  const unscoped = new taskcluster.Index({ rootUrl: t.rootUrl, credentials: await clientWith(['index:find-task:*']), retries: 0 }) as unknown as Client;
  await refused(unscoped.findArtifactFromTask('ref.project.latest', 'private/secret.txt'), 403, 'InsufficientScopes');
  const anonymousPrivate = await fetch(`${t.rootUrl}/api/index/v1/task/ref.project.latest/artifacts/private/secret.txt`, { redirect: 'manual' });
  assert.equal(anonymousPrivate.status, 403, 'no credentials: the anonymous role, which lacks the scope');
  const privateReader = await clientWith(['queue:get-artifact:private/secret.txt']);
  const scoped = new taskcluster.Index({ rootUrl: t.rootUrl, credentials: privateReader, retries: 0 }) as unknown as Client;
  assert.equal(await scoped.findArtifactFromTask('ref.project.latest', 'private/secret.txt'), undefined);
  const priv = await redirected('private/secret.txt', privateReader);
  assert.match(priv.url, new RegExp(`^${t.rootUrl}/api/queue/v1/task/${taskId}/artifacts/private/secret.txt\\?bewit=`));
  const secret = await fetch(priv.url);
  assert.equal(secret.status, 200, 'the signed link works without credentials');
  assert.equal(await secret.text(), 'private/secret.txt\n');
  const unsigned = await fetch(priv.url.replace(/\?bewit=.*$/, ''), { redirect: 'manual' });
  assert.equal(unsigned.status, 403, 'the queue still guards the private artifact');
  await refused(index.findArtifactFromTask('ref.project.nothing', 'public/build.txt'), 404, 'ResourceNotFound');

  // --- delete
  assert.deepEqual(await index.deleteTask('ref.project.latest'), {});
  await refused(index.findTask('ref.project.latest'), 404, 'ResourceNotFound');
  assert.ok((await index.listNamespaces('ref')).namespaces.some((n: { namespace: string }) => n.namespace === 'ref.project'), 'the namespaces above stay');

  // --- index paths are refused before any work when they are not Taskcluster's
  for (const bad of ['a..b', `${'a'.repeat(200)}.${'b'.repeat(60)}`, 'a b', '.a']) {
    await refused(index.findTask(bad), 400, 'InputError');
    await refused(index.insertTask(bad, { taskId, rank: 0, data: {}, expires }), 400, 'InputError');
  }

  const missing = reference.map((e) => e.name).filter((name) => !(name in NOT_SERVED.Index) && !exercised.has(name));
  assert.deepEqual(missing, [], `Index entries tgs serves that this test did not call: add a call above`);
});

test('the anonymous role holds the index\'s read scopes (migration 022): reads need no credentials, writes do', async () => {
  const index = new taskcluster.Index({ rootUrl: t.rootUrl, retries: 0 }) as unknown as Client;
  const root = new taskcluster.Index({ rootUrl: t.rootUrl, credentials: t.root, retries: 0 }) as unknown as Client;
  const taskId = slugid.nice();
  await root.insertTask('anon.reads.x', { taskId, rank: 0, data: {}, expires: taskcluster.fromNowJSON('1 hour') });
  assert.equal((await index.findTask('anon.reads.x')).taskId, taskId);
  assert.equal((await index.listTasks('anon.reads')).tasks.length, 1);
  assert.equal((await index.listNamespaces('anon')).namespaces.length, 1);
  await refused(index.insertTask('anon.reads.y', { taskId, rank: 0, data: {}, expires: taskcluster.fromNowJSON('1 hour') }), 403, 'InsufficientScopes');
  await refused(index.deleteTask('anon.reads.x'), 403, 'InsufficientScopes');
  const scoped = new taskcluster.Index({ rootUrl: t.rootUrl, credentials: await clientWith(['index:insert-task:anon.reads.*']), retries: 0 }) as unknown as Client;
  assert.equal((await scoped.insertTask('anon.reads.y', { taskId, rank: 0, data: {}, expires: taskcluster.fromNowJSON('1 hour') })).namespace, 'anon.reads.y');
  await refused(scoped.insertTask('anon.other', { taskId, rank: 0, data: {}, expires: taskcluster.fromNowJSON('1 hour') }), 403, 'InsufficientScopes');
});

test('the index serves its OpenAPI document, generated from the same declarations', async () => {
  const res = await fetch(`${t.rootUrl}/api/index/v1/openapi.json`);
  assert.equal(res.status, 200);
  const doc = (await res.json()) as { servers: { url: string }[]; paths: Record<string, Record<string, { operationId: string }>> };
  assert.equal(doc.servers[0].url, `${t.rootUrl}/api/index/v1`);
  const operations = Object.values(doc.paths).flatMap((methods) => Object.values(methods).map((op) => op.operationId));
  assert.deepEqual(operations.sort(), indexEndpoints.map((e) => e.name).sort());
  assert.ok(doc.paths['/task/{indexPath}/artifacts/{name}'].get);
});
