import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import slugid from 'slugid';
import { execFile } from 'node:child_process';
import { eventually, stackEnv, startStack, type Stack } from '../../support/stack.js';
import { startFastWorker, type FastWorker } from '../../support/fastWorker.js';
import { graphOf } from '../../support/graphs.js';
import { startTestTemporal } from '../../support/temporal.js';
import type { DevServer } from '../../src/temporal/devServer.js';
import { startBridge } from '../../src/bridge/bridge.js';
import { memoryBusUrl } from '../../src/exchanges/bus.js';
import { deploymentIdOf } from '../../src/db/deployment.js';
import { DeploymentConflictError, deploymentClaimId } from '../../src/temporal/deploymentClaim.js';
import { DEPLOYMENT_MEMO, WORKFLOW_TYPE, workflowIdFor } from '../../src/workflows/contract.js';

// Deployments (each its own database, so its own deployment id: src/db/deployment.ts) on ONE Temporal dev server and
// one RabbitMQ vhost (docs/deployments.md § Several deployments). `a` and `b` are configured alike (task queue
// tgs-scheduler); `c` has its own TGS_TASK_QUEUE.
let temporal: DevServer;
let a: Stack;
let b: Stack;
let c: Stack;
const workers: FastWorker[] = [];

before(async () => {
  temporal = await startTestTemporal();
  a = await startStack({ temporalAddress: temporal.address });
  b = await startStack({ temporalAddress: temporal.address, inProcessWorker: false });
  c = await startStack({ temporalAddress: temporal.address, configOverrides: { temporalTaskQueue: 'tgs-scheduler-c' } });
  for (const s of [a, b, c]) workers.push(startFastWorker({ rootUrl: s.api.rootUrl, credentials: s.api.root, provisionerId: 'tgs-test', workerType: 'fast' }));
});

after(async () => {
  for (const w of workers) await w.stop();
  for (const s of [a, b, c]) await s?.stop();
  await temporal?.stop();
});

const chain = () => graphOf({ one: {}, two: { requires: ['one'] }, three: { requires: ['two'] } });

async function submit(stack: Stack): Promise<string> {
  const id = slugid.nice();
  await stack.root.request('scheduler', 'PUT', `/task-graph/${id}`, chain());
  return id;
}

async function finished(stack: Stack, id: string, timeoutMs = 30_000): Promise<void> {
  await eventually(
    async () => {
      const { status } = await stack.root.request('scheduler', 'GET', `/task-graph/${id}/status`);
      if (status.state === 'finished') return true;
      throw new Error(`status ${JSON.stringify(status)}`);
    },
    `graph ${id} of task queue ${stack.config.temporalTaskQueue} finished`,
    timeoutMs,
  );
}

test('a second deployment on the same namespace and task queue refuses to start its scheduler worker, in one line naming the fix', async () => {
  const err = await b.startWorker().then(
    () => assert.fail('the second scheduler worker started'),
    (e: unknown) => e,
  );
  assert.ok(err instanceof DeploymentConflictError, String(err));
  const message = err.message;
  assert.doesNotMatch(message, /\n/);
  for (const setting of ['TGS_TASK_QUEUE', 'TEMPORAL_NAMESPACE', 'TGS_SCHEDULER_ID', 'TGS_EXCHANGE_PREFIX']) assert.match(message, new RegExp(setting));
  assert.match(message, /temporal workflow terminate --namespace default --workflow-id tgs-deployment\/tgs-scheduler/);
  assert.equal(err.other.deploymentId, await deploymentIdOf(a.api.db.pool));
  // `tgs scheduler-worker` with b's settings: exits 1 with that one line, no stack trace, no retries
  const run = await new Promise<{ code: number | null; stderr: string }>((resolve) => {
    const child = execFile(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', 'scheduler-worker'], { env: { ...process.env, ...stackEnv(b), TGS_LOG_LEVEL: 'warn' }, timeout: 60_000 }, (_err, _stdout, stderr) =>
      resolve({ code: child.exitCode, stderr }),
    );
  });
  assert.equal(run.code, 1, run.stderr);
  const refusal = run.stderr.split('\n').filter((l) => l.includes('refusing to start'));
  assert.equal(refusal.length, 1, run.stderr);
  assert.match(refusal[0], /^tgs: refusing to start: .*TGS_TASK_QUEUE.*temporal workflow terminate --namespace default --workflow-id tgs-deployment\/tgs-scheduler$/);
  // the same deployment (a restart, a second worker process) is not refused
  await a.stopWorker();
  await a.startWorker();
});

test('deployments with their own TGS_TASK_QUEUE on one namespace both finish all their graphs', async () => {
  const ids = await Promise.all([a, a, a, a, c, c, c, c].map(async (s) => ({ s, id: await submit(s) })));
  await Promise.all(ids.map(({ s, id }) => finished(s, id)));
});

test('a workflow of this deployment whose graph is missing here fails for good', async () => {
  const id = slugid.nice();
  const handle = await c.client.workflow.start(WORKFLOW_TYPE, {
    taskQueue: c.config.temporalTaskQueue,
    workflowId: workflowIdFor(id),
    args: [{ taskGraphId: id }],
    memo: { [DEPLOYMENT_MEMO]: await deploymentIdOf(c.api.db.pool) },
  });
  await assert.rejects(handle.result(), (e: Error & { cause?: Error }) => {
    assert.match(e.cause?.message ?? '', /does not exist/);
    return true;
  });
});

test("another deployment's workflow reaching this worker's activity is not failed for good: its owner's worker finishes it", async () => {
  // b's API starts the graph's workflow on tgs-scheduler, where only a's worker polls; a's database lacks the graph
  const id = await submit(b);
  const handle = b.client.workflow.getHandle(workflowIdFor(id));
  const failure = await eventually(
    async () => (await handle.describe()).raw.pendingActivities?.[0]?.lastFailure?.message ?? undefined,
    "the activity's failure on a's worker",
    30_000,
  );
  assert.match(failure, new RegExp(`belongs to tgs deployment ${await deploymentIdOf(b.api.db.pool)}`));
  assert.match(failure, /TGS_TASK_QUEUE/);
  assert.equal((await handle.describe()).status.name, 'RUNNING');
  // b takes the task queue over as the refusal says: a stops, its claim is released, b's worker starts
  await a.stopWorker();
  await b.client.workflow.getHandle(deploymentClaimId('tgs-scheduler')).terminate('test: deployment a is gone');
  await b.startWorker();
  await finished(b, id, 60_000);
});

test('a second deployment with the same exchange prefix and schedulerId on one vhost: its bridge refuses, naming the fix (RabbitMQ and the in-process bus)', async () => {
  const temporalOf = (s: Stack) => async () => s.client;
  const check = (e: Error) => {
    assert.doesNotMatch(e.message, /\n/);
    for (const setting of ['TGS_EXCHANGE_PREFIX', 'TGS_SCHEDULER_ID', 'AMQP_URL']) assert.match(e.message, new RegExp(setting));
    assert.match(e.message, /rabbitmqadmin delete exchange name=/);
    return true;
  };
  // RabbitMQ: b with a's exchange prefix (and the same default schedulerId), next to a's running bridge
  const rabbit = { ...b.config, exchangePrefix: a.config.exchangePrefix };
  const aId = await deploymentIdOf(a.api.db.pool);
  await assert.rejects(startBridge({ config: rabbit, pool: b.api.db.pool, temporal: temporalOf(b), log: () => undefined }), (e: Error) => check(e) && e.message.includes(`deployment ${aId}`));
  // the in-process bus
  const memory = memoryBusUrl(`deployments-${randomBytes(4).toString('hex')}`);
  const first = await startBridge({ config: { ...a.config, amqpUrl: memory }, pool: a.api.db.pool, temporal: temporalOf(a), log: () => undefined });
  try {
    await assert.rejects(startBridge({ config: { ...rabbit, amqpUrl: memory }, pool: b.api.db.pool, temporal: temporalOf(b), log: () => undefined }), check);
    // the same deployment's second bridge (competing consumers) is welcome
    const second = await startBridge({ config: { ...a.config, amqpUrl: memory }, pool: a.api.db.pool, temporal: temporalOf(a), log: () => undefined });
    await second.stop();
  } finally {
    await first.stop();
  }
});
