import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import slugid from 'slugid';
import { eventually, stackEnv } from '../../support/stack.js';
import { startFastWorker } from '../../support/fastWorker.js';
import { graphOf } from '../../support/graphs.js';
import { useStack } from '../helpers/stackFixture.js';

const stack = useStack({ inProcessBridge: false, inProcessWorker: false });

function spawnTgs(command: string): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', command], {
    env: { ...process.env, ...stackEnv(stack) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  // Both streams are drained: the processes log JSON lines to stdout, and a full pipe would stop them.
  for (const stream of [child.stdout, child.stderr]) {
    stream?.on('data', (d: Buffer) => {
      if (process.env.TGS_TEST_VERBOSE) process.stderr.write(`[${command}] ${d}`);
    });
  }
  return child;
}

const exited = (child: ChildProcess) => new Promise((resolve) => (child.exitCode !== null || child.signalCode ? resolve(null) : child.once('exit', resolve)));

test('the bridge and the scheduler worker killed (SIGKILL) mid-graph and restarted: the graph finishes, no task runs twice', async () => {
  let bridge = spawnTgs('bridge');
  let schedulerWorker = spawnTgs('scheduler-worker');
  // 20 chains of 10 tasks; the worker takes ~15 ms per task so the kill lands mid-graph.
  const nodes: Record<string, { requires?: string[] }> = {};
  for (let c = 0; c < 20; c++) for (let i = 0; i < 10; i++) nodes[`c${c}-${i}`] = { requires: i ? [`c${c}-${i - 1}`] : [] };
  const worker = startFastWorker({
    rootUrl: stack.api.rootUrl,
    credentials: stack.api.root,
    provisionerId: 'tgs-test',
    workerType: 'fast',
    concurrency: 8,
    decide: async () => {
      await new Promise((r) => setTimeout(r, 15));
      return 'completed' as const;
    },
  });
  try {
    const id = slugid.nice();
    await stack.root.request('scheduler', 'PUT', `/task-graph/${id}`, graphOf(nodes));
    // generous: the spawned processes start under whatever else the machine runs
    await eventually(async () => worker.reported.length >= 40, '40 tasks done', 120_000);
    bridge.kill('SIGKILL');
    schedulerWorker.kill('SIGKILL');
    await Promise.all([exited(bridge), exited(schedulerWorker)]);
    const atKill = worker.reported.length;
    assert.ok(atKill < 200, `killed mid-graph (${atKill} of 200 done)`);
    await new Promise((r) => setTimeout(r, 1000));
    bridge = spawnTgs('bridge');
    schedulerWorker = spawnTgs('scheduler-worker');
    await eventually(async () => (await stack.root.request('scheduler', 'GET', `/task-graph/${id}/status`)).status.state === 'finished', 'graph finished after restart', 120_000);
    const { rows } = await stack.api.db.pool.query<{ runs: number; n: number }>(
      `SELECT jsonb_array_length(runs) AS runs, count(*) AS n FROM tasks WHERE task_group_id = $1 GROUP BY 1`,
      [id],
    );
    assert.deepEqual(rows, [{ runs: 1, n: 200 }], 'every task ran exactly once');
    assert.equal(worker.reported.length, 200);
  } finally {
    await worker.stop();
    bridge.kill('SIGKILL');
    schedulerWorker.kill('SIGKILL');
    await Promise.all([exited(bridge), exited(schedulerWorker)]);
  }
});
