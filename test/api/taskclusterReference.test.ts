import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
// The official client, unmodified, and the references it ships: a client version with a new entry makes this fail.
import taskcluster from 'taskcluster-client';
import { NOT_SERVED } from '../../src/api/notServed.js';
import type { Endpoint } from '../../src/api/endpoint.js';
import { queueEndpoints } from '../../src/queue/api/index.js';
import { artifactEndpoints } from '../../src/queue/api/artifacts/index.js';
import { authEndpoints } from '../../src/authService/api/index.js';
import type { DevServer } from '../../src/temporal/devServer.js';
import { startTestApi, type TestApi } from '../../support/api.js';
import { startTestTemporal } from '../../support/temporal.js';
import { fastTask } from '../../support/graphs.js';
import { assertReferenceServed, recording as recordingClient, referenceEntries, type Client } from '../helpers/taskclusterReference.js';

const reference = (service: 'Queue' | 'Auth') => referenceEntries(service);
const declared: Record<'Queue' | 'Auth', Endpoint[]> = { Queue: [...queueEndpoints, ...artifactEndpoints], Auth: authEndpoints };

let t: TestApi;
let temporal: DevServer;
before(async () => {
  temporal = await startTestTemporal();
  t = await startTestApi({ temporalAddress: temporal.address, claimWorkWaitMs: 500 });
});
after(async () => {
  await t?.close();
  await temporal?.stop();
});

/** A client that records every method that answered (or refused) the way the test expected. */
function recording(service: 'Queue' | 'Auth', exercised: Set<string>, options: Record<string, unknown> = {}) {
  const client = new taskcluster[service]({ rootUrl: t.rootUrl, credentials: t.root, retries: 0, ...options }) as unknown as Client;
  const calls = recordingClient(client, exercised);
  /** Calls a method that must refuse with this status and code (Taskcluster's answer for the case). */
  const refuses = async (name: string, status: number, code: string, ...args: unknown[]) => {
    await assert.rejects(client[name](...args), (err: Error & { statusCode?: number; code?: string }) => {
      assert.equal(err.statusCode, status, `${name}: ${err.message}`);
      assert.equal(err.code, code, name);
      return true;
    });
    exercised.add(name);
  };
  return { calls, refuses };
}


test('every entry of the Queue and Auth references is served with its route and method, or listed in NOT_SERVED', () => {
  for (const service of ['Queue', 'Auth'] as const) assertReferenceServed(service, declared[service]);
});

test('every served entry answers through the official client; every NOT_SERVED entry is refused with Taskcluster\'s error shape', async () => {
  const exercised = { Queue: new Set<string>(), Auth: new Set<string>() };
  const { calls: queue, refuses: queueRefuses } = recording('Queue', exercised.Queue);
  const { calls: auth } = recording('Auth', exercised.Auth);
  const expires = taskcluster.fromNowJSON('1 hour');

  // --- service endpoints
  for (const client of [queue, auth]) {
    assert.equal((await client.ping()).alive, true);
    assert.deepEqual(await client.lbheartbeat(), {});
    assert.equal(typeof (await client.version()).version, 'string');
    const heartbeat = await client.heartbeat();
    assert.deepEqual(Object.keys(heartbeat).sort(), ['postgres', 'rabbitmq', 'temporal']);
  }

  // --- tasks, groups, claims, artifacts
  const task = (name: string, extra: Record<string, unknown> = {}) => ({ ...fastTask(name), provisionerId: 'tgs-ref', workerType: 'ref', ...extra });
  const taskGroupId = slugid.nice();
  const ids = [slugid.nice(), slugid.nice(), slugid.nice()];
  for (const [i, taskId] of ids.entries()) await queue.createTask(taskId, task(`ref-${i}`, { taskGroupId, priority: i === 0 ? 'high' : 'lowest' }));
  const dependent = slugid.nice();
  await queue.createTask(dependent, task('dependent', { taskGroupId, dependencies: [ids[0]] }));
  assert.equal((await queue.task(ids[0])).metadata.name, 'ref-0');
  assert.equal((await queue.status(ids[0])).status.state, 'pending');
  assert.equal((await queue.pendingTasks('tgs-ref/ref')).pendingTasks, 3);
  assert.deepEqual(await queue.taskQueueCounts('tgs-ref/ref'), { provisionerId: 'tgs-ref', workerType: 'ref', taskQueueId: 'tgs-ref/ref', pendingTasks: 3, claimedTasks: 0 });
  const firstPending = await queue.listPendingTasks('tgs-ref/ref', { limit: 2 });
  assert.equal(firstPending.tasks[0].taskId, ids[0], 'claim order: the high-priority task first');
  assert.equal((await queue.listPendingTasks('tgs-ref/ref', { continuationToken: firstPending.continuationToken })).tasks.length, 1);
  const unknownTaskId = slugid.nice();
  assert.deepEqual((await queue.tasks({ taskIds: [ids[1], unknownTaskId] })).tasks.map((x: { taskId: string; task: { metadata: { name: string } } }) => [x.taskId, x.task.metadata.name]), [[ids[1], 'ref-1']]);
  assert.deepEqual((await queue.statuses({ taskIds: [unknownTaskId, ids[2]] })).statuses.map((x: { taskId: string; status: { state: string } }) => [x.taskId, x.status.state]), [[ids[2], 'pending']]);
  assert.equal((await queue.listTaskGroup(taskGroupId)).tasks.length, 4);
  assert.equal((await queue.getTaskGroup(taskGroupId)).taskGroupId, taskGroupId);
  assert.deepEqual((await queue.listDependentTasks(ids[0])).tasks.map((x: { status: { taskId: string } }) => x.status.taskId), [dependent]);
  assert.equal((await queue.scheduleTask(dependent)).status.state, 'pending');
  assert.equal((await queue.cancelTask(dependent)).status.state, 'exception');

  const claimed = await queue.claimWork('tgs-ref/ref', { workerGroup: 'ref-group', workerId: 'ref-worker', tasks: 3 });
  assert.equal(claimed.tasks.length, 3);
  assert.equal(claimed.tasks[0].status.taskId, ids[0], 'highest priority first');
  assert.deepEqual((await queue.listClaimedTasks('tgs-ref/ref')).tasks.map((x: { taskId: string; workerId: string }) => x.workerId), ['ref-worker', 'ref-worker', 'ref-worker']);
  assert.equal((await queue.taskQueueCounts('tgs-ref/ref')).claimedTasks, 3);
  const reclaimed = await queue.reclaimTask(ids[0], 0);
  assert.equal(reclaimed.runId, 0);
  await queueRefuses('claimTask', 400, 'InputError', ids[1], 0, { workerGroup: 'ref-group', workerId: 'ref-worker' });

  const made = await queue.createArtifact(ids[0], 0, 'public/out.txt', { storageType: 's3', contentType: 'text/plain', expires });
  assert.equal((await fetch(made.putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'out\n' })).status, 200);
  await queue.createArtifact(ids[0], 0, 'public/ping.json', { storageType: 'reference', url: `${t.rootUrl}/api/queue/v1/ping`, contentType: 'application/json', expires });
  await queueRefuses('finishArtifact', 400, 'InputError', ids[0], 0, 'public/out.txt', { uploadId: slugid.nice() });
  // the client does not follow the 303: it reads its body, Taskcluster's {storageType, url}
  assert.equal((await queue.getArtifact(ids[0], 0, 'public/ping.json')).url, `${t.rootUrl}/api/queue/v1/ping`);
  assert.equal((await queue.getLatestArtifact(ids[0], 'public/ping.json')).storageType, 'reference');
  assert.equal((await queue.artifact(ids[0], 0, 'public/out.txt')).storageType, 's3');
  assert.equal((await queue.latestArtifact(ids[0], 'public/ping.json')).storageType, 'reference');
  assert.equal((await queue.listArtifacts(ids[0], 0)).artifacts.length, 2);
  assert.equal((await queue.listLatestArtifacts(ids[0], { limit: 1 })).artifacts.length, 1);
  assert.equal((await queue.artifactInfo(ids[0], 0, 'public/out.txt')).contentType, 'text/plain');
  assert.equal((await queue.latestArtifactInfo(ids[0], 'public/out.txt')).name, 'public/out.txt');

  assert.equal((await queue.reportCompleted(ids[0], 0)).status.state, 'completed');
  assert.equal((await queue.reportFailed(ids[1], 0)).status.state, 'failed');
  assert.equal((await queue.reportException(ids[2], 0, { reason: 'malformed-payload' })).status.state, 'exception');
  assert.equal((await queue.rerunTask(ids[0])).status.state, 'pending');

  const sealed = slugid.nice();
  await queue.createTask(slugid.nice(), task('sealed', { taskGroupId: sealed }));
  assert.ok((await queue.sealTaskGroup(sealed)).sealed);
  assert.equal((await queue.cancelTaskGroup(sealed)).cancelledCount, 1);

  // --- worker metadata
  const queues = await queue.listTaskQueues();
  assert.ok(queues.taskQueues.some((q: { taskQueueId: string }) => q.taskQueueId === 'tgs-ref/ref'));
  const tq = await queue.getTaskQueue('tgs-ref/ref');
  assert.equal(tq.pendingTasks, 1, 'the rerun');
  assert.ok(new Date(tq.lastDateActive).getTime() > Date.now() - 60_000);
  assert.equal((await queue.declareProvisioner('tgs-ref', { description: 'reference test' })).description, 'reference test');
  assert.equal((await queue.getProvisioner('tgs-ref')).description, 'reference test');
  assert.ok((await queue.listProvisioners()).provisioners.some((p: { provisionerId: string }) => p.provisionerId === 'tgs-ref'));
  assert.equal((await queue.declareWorkerType('tgs-ref', 'ref', { stability: 'stable' })).stability, 'stable');
  assert.equal((await queue.getWorkerType('tgs-ref', 'ref')).taskQueueId, 'tgs-ref/ref');
  assert.deepEqual((await queue.listWorkerTypes('tgs-ref')).workerTypes.map((w: { workerType: string }) => w.workerType), ['ref']);
  const workers = await queue.listWorkers('tgs-ref', 'ref');
  assert.deepEqual(workers.workers.map((w: { workerId: string }) => w.workerId), ['ref-worker']);
  assert.ok(workers.workers[0].latestTask, 'the latest claimed run');
  const worker = await queue.getWorker('tgs-ref', 'ref', 'ref-group', 'ref-worker');
  assert.deepEqual(worker.recentTasks.map((r: { taskId: string }) => r.taskId).sort(), [...ids].sort());
  const until = taskcluster.fromNowJSON('1 hour');
  assert.equal((await queue.quarantineWorker('tgs-ref', 'ref', 'ref-group', 'ref-worker', { quarantineUntil: until, quarantineInfo: 'reference test' })).quarantineUntil, until);
  assert.equal((await queue.declareWorker('tgs-ref', 'ref', 'ref-group', 'declared', { expires })).workerId, 'declared');

  // --- auth: clients and roles
  const clientId = `project/ref-${slugid.nice()}`;
  const created = await auth.createClient(clientId, { description: 'ref', expires, scopes: ['assume:ref:role'] });
  assert.equal((await auth.client(clientId)).clientId, clientId);
  assert.ok((await auth.listClients({ prefix: 'project/ref-' })).clients.some((c: { clientId: string }) => c.clientId === clientId));
  assert.equal((await auth.updateClient(clientId, { description: 'ref2', expires, scopes: ['assume:ref:role'] })).description, 'ref2');
  const reset = await auth.resetAccessToken(clientId);
  assert.notEqual(reset.accessToken, created.accessToken);
  // a disabled client (and what it issued) cannot authenticate until it is enabled again
  const own = new taskcluster.Auth({ rootUrl: t.rootUrl, credentials: { clientId, accessToken: reset.accessToken }, retries: 0 });
  const issued = new taskcluster.Auth({
    rootUrl: t.rootUrl,
    retries: 0,
    credentials: taskcluster.createTemporaryCredentials({
      credentials: { clientId, accessToken: reset.accessToken },
      start: new Date(Date.now() - 60_000),
      expiry: new Date(Date.now() + 3_600_000),
      scopes: ['assume:ref:role'],
    }),
  });
  assert.equal((await auth.disableClient(clientId)).disabled, true);
  for (const c of [own, issued]) await assert.rejects(c.currentScopes(), (err: { statusCode?: number }) => err.statusCode === 401);
  assert.equal((await auth.enableClient(clientId)).disabled, false);
  await auth.createRole('ref:role', { description: 'ref', scopes: ['auth:current-scopes'] });
  await auth.updateRole('ref:role', { description: 'ref2', scopes: ['auth:current-scopes', 'ref:x'] });
  assert.deepEqual((await auth.role('ref:role')).scopes, ['auth:current-scopes', 'ref:x']);
  assert.ok((await auth.listRoles()).some((r: { roleId: string }) => r.roleId === 'ref:role'));
  assert.ok((await auth.listRoles2()).roles.some((r: { roleId: string }) => r.roleId === 'ref:role'));
  assert.ok((await auth.listRoleIds()).roleIds.includes('ref:role'));
  assert.ok((await auth.expandScopes({ scopes: ['assume:ref:role'] })).scopes.includes('ref:x'));
  assert.ok((await auth.currentScopes()).scopes.includes('*'));
  for (const c of [own, issued]) assert.ok((await c.currentScopes()).scopes.includes('ref:x'), 'enabled again; the role grants ref:x');
  await auth.deleteRole('ref:role');
  await auth.deleteClient(clientId);
  // the audit history of the client's changes, and of what the root client changed
  const history = await auth.getEntityHistory('client', clientId);
  assert.deepEqual(
    history.auditHistory.map((h: { actionType: string }) => h.actionType),
    ['created', 'updated', 'access token reset', 'client disabled', 'client enabled', 'deleted'],
  );
  assert.ok(history.auditHistory.every((h: { clientId: string }) => h.clientId === t.root.clientId));
  const byRoot = await auth.listAuditHistory(t.root.clientId, { limit: 1 });
  assert.equal(byRoot.auditHistory.length, 1);
  assert.ok(byRoot.continuationToken, 'paged');

  // --- Taskcluster's authenticateHawk (no credentials in the request shown: no-auth) and test endpoints (tester/no-secret)
  assert.equal((await auth.authenticateHawk({ method: 'get', resource: '/api/x/v1/y', host: 'other.example.com', port: 443 })).status, 'no-auth');
  const tester = recordingClient(
    new taskcluster.Auth({ rootUrl: t.rootUrl, credentials: { clientId: 'tester', accessToken: 'no-secret' }, retries: 0 }) as unknown as Client,
    exercised.Auth,
  );
  assert.deepEqual(await tester.testAuthenticate({ clientScopes: ['test:*'], requiredScopes: ['test:a'] }), { clientId: 'tester', scopes: ['assume:anonymous', 'test:*'] });
  assert.equal((await tester.testAuthenticateGet()).clientId, 'tester');

  // --- what tgs does not serve is refused in Taskcluster's shape, never a 5xx
  for (const service of ['Queue', 'Auth'] as const) {
    const client = new taskcluster[service]({ rootUrl: t.rootUrl, credentials: t.root, retries: 0 }) as unknown as Client;
    for (const entry of reference(service)) {
      if (!(entry.name in NOT_SERVED[service]) || exercised[service].has(entry.name)) continue;
      const args = [...entry.args.map(() => 'x'), ...(entry.input ? [{}] : [])];
      await assert.rejects(client[entry.name](...args), (err: Error & { statusCode?: number; body?: { code?: string; message?: string } }) => {
        assert.equal(err.statusCode, 404, `${service}.${entry.name}: ${err.message}`);
        assert.equal(err.body?.code, 'ResourceNotFound');
        return true;
      });
    }
  }

  for (const service of ['Queue', 'Auth'] as const) {
    const missing = reference(service)
      .map((e) => e.name)
      .filter((name) => !(name in NOT_SERVED[service]) && !exercised[service].has(name));
    assert.deepEqual(missing, [], `${service} entries tgs serves that this test did not call: add a call above`);
  }
});
