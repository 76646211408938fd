import slugid from 'slugid';
import { insertPendingTasks } from '../../support/db.js';
import { fastTask } from '../../support/graphs.js';
import { testIssuer } from '../../support/issuer.js';
import { createPool } from '../../src/db/pool.js';
import { claimPending } from '../../src/queue/claimWork.js';
import { resolveRun } from '../../src/queue/resolveTask.js';
import { startFastWorker } from '../../support/fastWorker.js';
import { percentile } from '../stats.js';
import { cpuSince, cpuSnapshot } from '../cpu.js';
import type { BenchStack, Sizes } from '../scenario.js';

/**
 * The queue alone, over HTTP with Hawk: enqueue → claim latency with a claimer already waiting
 * (LISTEN/NOTIFY wakes it), and claim+complete throughput with 16 concurrent claimers.
 */
export async function run(stack: BenchStack, sizes: Sizes) {
  stack.log('queue: enqueue → claim latency, claim+complete throughput with 16 claimers');
  const api = stack.root;
  const claimers = 16;
  // Latency: one waiting claimer, tasks created one at a time.
  const claimedAt = new Map<string, number>();
  const latencyWorker = startFastWorker({
    rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'qlat', concurrency: 1,
    onClaim: (t) => claimedAt.set(t.taskId, performance.now()),
  });
  await new Promise((r) => setTimeout(r, 300));
  const latencies: number[] = [];
  for (let i = 0; i < 100; i++) {
    const id = slugid.nice();
    await api.request('queue', 'PUT', `/task/${id}`, { ...fastTask(`lat${i}`), workerType: 'qlat' });
    const created = performance.now();
    while (!claimedAt.has(id)) await new Promise((r) => setTimeout(r, 1));
    latencies.push((claimedAt.get(id) as number) - created);
  }
  await latencyWorker.stop();
  // Throughput: create the tasks first (createTask one at a time, 50 at once, as a decision task would: timed too),
  // then time the claimers draining them; once claiming one task per claimWork call, once claiming up to 8 (as a
  // worker with capacity does).
  const drain = async (workerType: string, batch: number, transport: 'claimWork' | 'stream' = 'claimWork') => {
    const ids = Array.from({ length: sizes.queueTasks }, () => slugid.nice());
    const created0 = performance.now();
    const cpuBeforeCreate = cpuSnapshot(stack.processNames());
    for (let i = 0; i < ids.length; i += 50) {
      await Promise.all(ids.slice(i, i + 50).map((id, k) => api.request('queue', 'PUT', `/task/${id}`, { ...fastTask(`tp${i + k}`), workerType })));
    }
    const create = { perS: Math.round(ids.length / ((performance.now() - created0) / 1000)), cpu: cpuSince(cpuBeforeCreate, cpuSnapshot(stack.processNames()), ids.length) };
    const t0 = performance.now();
    const cpuBefore = cpuSnapshot(stack.processNames());
    const worker = startFastWorker({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType, concurrency: claimers, batch, transport });
    while (worker.reported.length < ids.length) await new Promise((r) => setTimeout(r, 20));
    const seconds = (performance.now() - t0) / 1000;
    const cpu = cpuSince(cpuBefore, cpuSnapshot(stack.processNames()), ids.length);
    await worker.stop();
    return { perS: Math.round(ids.length / seconds), cpu, create };
  };
  const single = await drain('qtp', 1);
  const batched = await drain('qtp8', 8);
  // tgs' worker stream with the capacity of the 16 claimers of up to 8 (128): claims pushed, reports in frames
  const streamed = await drain('qstream', 8, 'stream');
  const floor = await statementFloor(stack, sizes.queueTasks, claimers, 8);
  return {
    claim_p50_ms: percentile(latencies, 50),
    claim_p99_ms: percentile(latencies, 99),
    // createTask, 50 requests at once: tasks a second and CPU per task by process
    create_per_s: single.create.perS,
    cpu_ms_per_task_create: single.create.cpu,
    claim_complete_per_s: single.perS,
    claim_complete_batch8_per_s: batched.perS,
    // CPU milliseconds per task, by process, while draining (where the time goes)
    cpu_ms_per_task: single.cpu,
    cpu_ms_per_task_batch8: batched.cpu,
    claim_complete_stream_per_s: streamed.perS,
    cpu_ms_per_task_stream: streamed.cpu,
    // the floor: the same claims (up to 8 a call) and reports as bare statements, no HTTP in between
    floor_per_s: floor.perS,
    cpu_ms_per_task_floor: floor.cpu,
  };
}

/**
 * Claim + complete done the bare way, in the same run: `count` pending tasks claimed `batch` at a time and each
 * reported completed with the very functions the API's claimWork and reportCompleted call (claimPending, resolveRun),
 * from `claimers` loops in the bench process over a pool of as many connections. No HTTP, Hawk, API process or log
 * line in between; the relay still publishes what the statements write, as it does for the API's. The tasks share one
 * group, and no task-group-resolved check follows the reports (the drains' tasks are a group each, announced).
 */
async function statementFloor(stack: BenchStack, count: number, claimers: number, batch: number) {
  const pool = createPool(stack.config.databaseUrl, claimers);
  const issuer = testIssuer();
  const groups = { note: () => undefined };
  try {
    await insertPendingTasks(pool, count, 'qfloor');
    const t0 = performance.now();
    const cpuBefore = cpuSnapshot(stack.processNames());
    let reported = 0;
    await Promise.all(
      Array.from({ length: claimers }, async (_, k) => {
        for (;;) {
          const claimed = await claimPending(pool, stack.config, issuer, { provisionerId: 'tgs-test', workerType: 'qfloor', workerGroup: 'floor', workerId: `w${k}`, count: batch });
          if (claimed.length === 0) return;
          await Promise.all(claimed.map((t) => resolveRun(pool, stack.config, groups, t.status.taskId, t.runId, 'completed')));
          reported += claimed.length;
        }
      }),
    );
    const seconds = (performance.now() - t0) / 1000;
    if (reported !== count) throw new Error(`queue floor: ${reported} of ${count} tasks claimed and reported`);
    return { perS: Math.round(count / seconds), cpu: cpuSince(cpuBefore, cpuSnapshot(stack.processNames()), count) };
  } finally {
    await pool.end();
  }
}
