import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { Writable } from 'node:stream';
import slugid from 'slugid';
// The official client, unmodified: if tgs drifts from Taskcluster's paths, shapes or Hawk scheme, this fails.
import taskcluster from 'taskcluster-client';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';

let t: TestApi;
before(async () => {
  t = await startTestApi({ claimWorkWaitMs: 2000 });
});
after(async () => {
  await t.close();
});

const queueWith = (credentials: { clientId: string; accessToken: string; certificate?: string }) =>
  new taskcluster.Queue({ rootUrl: t.rootUrl, credentials, retries: 0 });

test('taskcluster-client Queue: createTask, claimWork, reclaimTask, createArtifact + upload, reportCompleted, status, download', async () => {
  const queue = queueWith(t.root);
  const taskId = slugid.nice();
  const created = await queue.createTask(taskId, { ...fastTask('tc-client'), workerType: 'tc1', routes: ['index.tgs.tc'] });
  assert.equal(created.status.state, 'pending');

  const claim = await queue.claimWork('tgs-test/tc1', { workerGroup: 'tc-group', workerId: 'tc-worker', tasks: 1 });
  assert.equal(claim.tasks.length, 1);
  const { runId, credentials } = claim.tasks[0];
  assert.equal(claim.tasks[0].status.taskId, taskId);
  assert.equal(claim.tasks[0].task.metadata.name, 'tc-client');

  // From here on the worker uses only the run's temporary credentials, as a Taskcluster worker does.
  const worker = queueWith(credentials);
  const reclaimed = await worker.reclaimTask(taskId, runId);
  assert.ok(new Date(reclaimed.takenUntil) >= new Date(claim.tasks[0].takenUntil));

  const name = 'public/build/result.txt';
  const artifact = await worker.createArtifact(taskId, runId, name, {
    storageType: 's3',
    contentType: 'text/plain',
    expires: taskcluster.fromNowJSON('1 hour'),
  });
  assert.equal(artifact.storageType, 's3');
  const upload = await fetch(artifact.putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: 'built by tgs\n' });
  assert.equal(upload.status, 200);

  const done = await worker.reportCompleted(taskId, runId);
  assert.equal(done.status.state, 'completed');
  const status = await queue.status(taskId);
  assert.equal(status.status.runs[0].reasonResolved, 'completed');
  assert.equal(status.status.runs[0].workerId, 'tc-worker');

  const listed = await queue.listArtifacts(taskId, runId);
  assert.deepEqual(listed.artifacts.map((a: { name: string }) => a.name), [name]);

  // The client's own download helper follows `artifact` → signed tgs URL.
  const chunks: Buffer[] = [];
  const contentType = await taskcluster.downloadArtifact({
    taskId,
    name,
    queue,
    streamFactory: async () =>
      new Writable({
        write(chunk: Buffer, _enc, cb) {
          chunks.push(chunk);
          cb();
        },
      }),
  });
  assert.equal(contentType, 'text/plain');
  assert.equal(Buffer.concat(chunks).toString(), 'built by tgs\n');

  // A URL signed by the client (bewit) for a private artifact reaches it without headers.
  const url = queue.buildSignedUrl(queue.getArtifact, taskId, runId, name);
  const viaBewit = await fetch(url, { redirect: 'manual' });
  assert.equal(viaBewit.status, 303);
});

test('taskcluster-client: missing scopes → InsufficientScopes 403 with Taskcluster\'s error shape', async () => {
  const queue = queueWith(t.root);
  const taskId = slugid.nice();
  await queue.createTask(taskId, { ...fastTask('tc-403'), workerType: 'tc2' });
  const claim = await queue.claimWork('tgs-test/tc2', { workerGroup: 'g', workerId: 'w', tasks: 1 });
  const worker = queueWith(claim.tasks[0].credentials);
  // the run's credentials cannot create tasks, nor resolve another task's run
  const otherId = slugid.nice();
  await assert.rejects(worker.createTask(otherId, { ...fastTask('nope'), workerType: 'tc2' }), (err: Error & { statusCode?: number; code?: string }) => {
    assert.equal(err.statusCode, 403);
    assert.equal(err.code, 'InsufficientScopes');
    assert.match(err.message, /queue:create-task:/);
    return true;
  });
  const stranger = queueWith({ clientId: 'static/tgs/root', accessToken: 'wrong-token' });
  await assert.rejects(stranger.status(taskId).then(() => stranger.cancelTask(taskId)), (err: Error & { statusCode?: number }) => {
    assert.equal(err.statusCode, 401);
    return true;
  });
  const { rows } = await t.db.pool.query('SELECT count(*)::int AS n FROM tasks WHERE task_id = $1', [otherId]);
  assert.equal(rows[0].n, 0);
});
