import slugid from 'slugid';
import { insertPendingTasks } from '../../support/db.js';
import { fastTask } from '../../support/graphs.js';
import { testIssuer } from '../../support/issuer.js';
import { createPool } from '../../src/db/pool.js';
import { claimPending } from '../../src/queue/claimWork.js';
import { resolveRun } from '../../src/queue/resolveTask.js';
import { GroupAnnouncer } from '../../src/queue/groupAnnouncer.js';
import { startFastWorker } from '../../support/fastWorker.js';
import { medianRatio, percentile } from '../stats.js';
import { cpuSince, cpuSnapshot } from '../cpu.js';
import { countSnapshot, perTask } from '../perTaskCounts.js';
import { busyMsBetween, machineSnapshot } from '../machineCpu.js';
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
  // Throughput: once claiming one task per claimWork call, once claiming up to 8 (as a worker with capacity does).
  const drain = (workerType: string, batch: number, transport: 'claimWork' | 'stream' = 'claimWork') =>
    drainQueue(stack, sizes.queueTasks, workerType, claimers, batch, transport);
  const single = await drain('qtp', 1);
  // Claiming up to 8 and its floor, alternated `queueRounds` times: the machine's speed drifts by a third within a
  // minute here (one run's batched drain and floor gave 1,569 and 2,009 tasks/s, the next run's 1,285 and 2,639), so
  // each round's two measurements sit side by side and the ratio is the median of the rounds'.
  const rounds: { drained: Awaited<ReturnType<typeof drain>>; floor: Awaited<ReturnType<typeof statementFloor>> }[] = [];
  for (let i = 0; i < sizes.queueRounds; i++) {
    const drained = await drain(`qtp8-${i}`, 8);
    rounds.push({ drained, floor: await statementFloor(stack, sizes.queueTasks, claimers, 8) });
  }
  const batched = rounds.map((r) => r.drained);
  const floors = rounds.map((r) => r.floor);
  // tgs' worker stream with the capacity of the 16 claimers of up to 8 (128): claims pushed, reports in frames
  const streamed = await drain('qstream', 8, 'stream');
  return {
    claim_p50_ms: percentile(latencies, 50),
    claim_p99_ms: percentile(latencies, 99),
    // createTask, 50 requests at once: tasks a second and CPU per task by process
    create_per_s: single.create.perS,
    cpu_ms_per_task_create: single.create.cpu,
    claim_complete_per_s: single.perS,
    // the rounds' medians, each round's figure, and the median of the rounds' ratios to their floors
    claim_complete_batch8_per_s: percentile(batched.map((b) => b.perS), 50),
    claim_complete_batch8_rounds_per_s: batched.map((b) => b.perS),
    claim_complete_floor_ratio: medianRatio(rounds.map((r) => [r.drained.perS, r.floor.perS])),
    // CPU milliseconds per task, by process, while draining (where the time goes; over all rounds)
    cpu_ms_per_task: single.cpu,
    cpu_ms_per_task_batch8: meanCpu(batched.map((b) => b.cpu)),
    claim_complete_stream_per_s: streamed.perS,
    cpu_ms_per_task_stream: streamed.cpu,
    // the floor: the same claims (up to 8 a call) and reports as bare statements, no HTTP in between
    floor_per_s: percentile(floors.map((f) => f.perS), 50),
    floor_rounds_per_s: floors.map((f) => f.perS),
    cpu_ms_per_task_floor: meanCpu(floors.map((f) => f.cpu)),
    // what each drain and the floor wrote per task (bench/perTaskCounts.ts): the machine's speed does not move them
    per_task_single: single.counts,
    per_task_batch8: batched[0].counts,
    per_task_stream: streamed.counts,
    per_task_floor: floors[0].counts,
  };
}

/**
 * `count` tasks created first (createTask, 50 requests at once into one group, as a decision task would: timed too),
 * then drained by the fast worker with `claimers` × `batch` of capacity, claiming with claimWork (`batch` a call, one
 * Taskcluster report a run) or over the worker stream: tasks a second, CPU per task by process, the machine's busy CPU
 * per task (/proc/stat: every process, Postgres included) and what the drain wrote a task.
 */
export async function drainQueue(stack: BenchStack, count: number, workerType: string, claimers: number, batch: number, transport: 'claimWork' | 'stream' = 'claimWork') {
  const api = stack.root;
  const ids = Array.from({ length: count }, () => slugid.nice());
  // one task group for the drain's tasks, as a decision task's (and the floor's): a group each would add a
  // task-group-resolved message and a group row's update to every report, which the floor does not make
  const taskGroupId = slugid.nice();
  const created0 = performance.now();
  const cpuBeforeCreate = cpuSnapshot(stack.processNames());
  for (let i = 0; i < ids.length; i += 50) {
    await Promise.all(ids.slice(i, i + 50).map((id, k) => api.request('queue', 'PUT', `/task/${id}`, { ...fastTask(`tp${i + k}`), workerType, taskGroupId })));
  }
  const create = { perS: Math.round(ids.length / ((performance.now() - created0) / 1000)), cpu: cpuSince(cpuBeforeCreate, cpuSnapshot(stack.processNames()), ids.length) };
  const counts = await countSnapshot(stack);
  const t0 = performance.now();
  const cpuBefore = cpuSnapshot(stack.processNames());
  const machineBefore = machineSnapshot();
  const worker = startFastWorker({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType, concurrency: claimers, batch, transport });
  while (worker.reported.length < ids.length) await new Promise((r) => setTimeout(r, 20));
  const seconds = (performance.now() - t0) / 1000;
  const cpu = cpuSince(cpuBefore, cpuSnapshot(stack.processNames()), ids.length);
  const machineMsPerTask = Math.round((busyMsBetween(machineBefore, machineSnapshot()) / ids.length) * 100) / 100;
  await worker.stop();
  return { perS: Math.round(ids.length / seconds), cpu, machineMsPerTask, create, counts: await perTask(stack, counts, ids.length) };
}

/** CPU ms per task by process over rounds of as many tasks each: their mean, rounded as cpuSince rounds. */
function meanCpu(rounds: Record<string, number>[]): Record<string, number> {
  const sums: Record<string, number> = {};
  for (const r of rounds) for (const [k, v] of Object.entries(r)) sums[k] = (sums[k] ?? 0) + v;
  const mean = Object.entries(sums).map(([k, v]) => [k, Math.round((v / rounds.length) * 100) / 100] as const);
  // largest first and the total last, as cpuSince gives them
  return Object.fromEntries(mean.sort((a, b) => (a[0] === 'total' ? 1 : b[0] === 'total' ? -1 : b[1] - a[1])));
}

/**
 * Claim + complete done the bare way, in the same run: `count` pending tasks claimed `batch` at a time and each
 * reported completed with the very functions the API's claimWork and reportCompleted call (claimPending, resolveRun),
 * from `claimers` loops in the bench process over a pool of as many connections. No HTTP, Hawk, API process or log
 * line in between; the relay still publishes what the statements write, as it does for the API's. The tasks share one
 * group, as each drain's do, and the reports note it to a GroupAnnouncer, as the API's do: the same statements and
 * messages a task (bench/perTaskCounts.ts counts them for both).
 */
async function statementFloor(stack: BenchStack, count: number, claimers: number, batch: number) {
  const pool = createPool(stack.config.databaseUrl, claimers);
  const issuer = testIssuer();
  const groups = new GroupAnnouncer(pool, stack.config);
  try {
    await insertPendingTasks(pool, count, 'qfloor');
    const counts = await countSnapshot(stack);
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
    const cpu = cpuSince(cpuBefore, cpuSnapshot(stack.processNames()), count);
    return { perS: Math.round(count / seconds), cpu, counts: await perTask(stack, counts, count) };
  } finally {
    await groups.stop();
    await pool.end();
  }
}
