import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import slugid from 'slugid';
import { eventually, stackEnv } from '../../support/stack.js';
import { graphOf } from '../../support/graphs.js';
import { outboxCount } from '../../support/db.js';
import { statusQuery, workflowIdFor } from '../../src/workflows/contract.js';
import { useStack } from '../helpers/stackFixture.js';

// The graph-signal lane (src/relay/graphSignalLane.ts) on real Postgres, RabbitMQ and Temporal, with no bridge
// running: resolutions reach graphs from the relay alone. The relay runs as `tgs relay` processes, so that one can be
// killed (SIGKILL) between recording its rows and signalling them.
const stack = useStack({ inProcessBridge: false, inProcessRelay: false });

function spawnRelay(env: Record<string, string> = {}): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', 'relay'], {
    env: { ...process.env, ...stackEnv(stack), ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  for (const stream of [child.stdout, child.stderr]) {
    stream?.on('data', (d: Buffer) => {
      if (process.env.TGS_TEST_VERBOSE) process.stderr.write(`[relay] ${d}`);
    });
  }
  return child;
}
const exited = (child: ChildProcess) => new Promise((resolve) => (child.exitCode !== null || child.signalCode ? resolve(null) : child.once('exit', resolve)));

/** A graph first → second whose tasks nobody claims but the test (a worker type of its own); its task ids by label. */
async function manualChain() {
  const graph = graphOf({ first: {}, second: { requires: ['first'] } });
  const workerType = `manual-${slugid.nice().slice(0, 8).toLowerCase().replace(/[^a-z0-9]/g, 'x')}`;
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = workerType;
  const id = slugid.nice();
  const res = await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${id}`, graph);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const ids = new Map((res.body.tasks as { label: string; taskId: string }[]).map((t) => [t.label, t.taskId]));
  return { id, workerType, first: ids.get('first') as string, second: ids.get('second') as string };
}
const state = async (taskId: string) => (await stack.api.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status.state as string;
const laneRows = async (graphId: string) =>
  (await stack.api.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM graph_signals WHERE task_graph_id = $1', [graphId])).rows[0].n;

/** Claims and completes `first` once its graph's dispatch has ended (so the graph can only learn of it from a signal). */
async function completeFirst(chain: { id: string; workerType: string; first: string }) {
  await eventually(async () => (await state(chain.first)) === 'pending', 'first pending');
  const handle = stack.client.workflow.getHandle(workflowIdFor(chain.id));
  await eventually(async () => (await handle.query(statusQuery)).counts.scheduled === 1, "the graph's dispatch ended");
  const claim = await stack.api.request('POST', `/api/queue/v1/claim-work/tgs-test/${chain.workerType}`, { tasks: 1, workerGroup: 'g', workerId: 'w' });
  assert.equal(claim.body.tasks[0].status.taskId, chain.first);
  const done = await stack.api.request('POST', `/api/queue/v1/task/${chain.first}/runs/0/completed`);
  assert.equal(done.status, 200);
}

test('a resolution committed reaches its graph from the relay, with no bridge running, and its lane row is deleted', async () => {
  const relay = spawnRelay();
  try {
    const chain = await manualChain();
    await completeFirst(chain);
    // a graph's own reconciliation would take 60 s of quiet (src/workflows/graphRun.ts): this is the signal
    await eventually(async () => (await state(chain.second)) === 'pending', 'second scheduled by the signal', 15_000);
    await eventually(async () => (await laneRows(chain.id)) === 0, 'the accepted row deleted', 5_000);
  } finally {
    relay.kill('SIGTERM');
    await exited(relay);
  }
});

test('a relay killed after recording its rows but before Temporal accepted them: the next relay signals them', async () => {
  // Temporal unreachable for this relay: it publishes and records, but no signal of its is ever accepted
  let relay = spawnRelay({ TEMPORAL_ADDRESS: '127.0.0.1:1' });
  try {
    const chain = await manualChain();
    await completeFirst(chain);
    await eventually(async () => (await outboxCount(stack.api.db.pool)) === 0, 'the resolution published');
    assert.equal(await laneRows(chain.id), 1, 'recorded by the read that published it');
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(await state(chain.second), 'unscheduled', 'no signal reached the graph');
    relay.kill('SIGKILL');
    await exited(relay);
    assert.equal(await laneRows(chain.id), 1, 'rows are deleted only once Temporal accepted them');

    relay = spawnRelay();
    await eventually(async () => (await state(chain.second)) === 'pending', 'second scheduled by the restarted relay', 30_000);
    await eventually(async () => (await laneRows(chain.id)) === 0, 'the accepted row deleted', 5_000);
  } finally {
    relay.kill('SIGTERM');
    await exited(relay);
  }
});
