import { fork, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import pg from 'pg';
import { cpuSince, cpuSnapshot } from '../cpu.js';
import { ownDatabase } from '../ownDatabase.js';
import { busyMsBetween, machineSnapshot } from '../machineCpu.js';
import { PEER_MODES, type PeerMode, type PeerReply, type PeerRequest } from '../peer/protocol.js';
import { databaseCounts } from '../perTaskCounts.js';
import { medianRatio, percentile } from '../stats.js';
import { drainQueue } from './queue.js';
import { LANE_FLOOR_BATCHES, startBatchedLaneFloor } from '../floor/batchedLane.js';
import type { BenchStack, Sizes } from '../scenario.js';

/**
 * tgs against a peer, graphile-worker (a Postgres job queue for Node), on the same machine, Postgres server and
 * settings, in rounds alternated: tgs's worker-stream drain and its claim + complete with Taskcluster's calls (up to 8
 * a claim), then the peer in its four modes (bench/peer/protocol.ts), `peerJobs` no-op tasks each at 16 workers. The
 * peer runs in a process of its own (bench/peer/graphileWorker.ts) on a database of its own, created here and dropped
 * at the end; each mode runs once at a small size first, so that it is measured warm as tgs's processes are.
 * Each round ends with the floor of a batched lane (bench/floor/batchedLane.ts: the least work any design must do
 * under the goal's rules, no tgs code in the loop) at each of LANE_FLOOR_BATCHES, on as many tasks.
 * Each measurement gives tasks a second, the machine's busy CPU per task (/proc/stat: every process, Postgres
 * included, and whatever else runs on the machine) and CPU per task by process (/proc/<pid>: the peer's process, the
 * tgs processes, Postgres, RabbitMQ, Temporal, the bench process).
 */
export async function run(stack: BenchStack, sizes: Sizes) {
  const jobs = sizes.peerJobs;
  const concurrency = 16;
  stack.log(`peer: graphile-worker in ${PEER_MODES.length} modes and a batched lane's floor at ${LANE_FLOOR_BATCHES.length} batch sizes against tgs's drains, ${jobs} tasks each, ${sizes.peerRounds} rounds alternated`);
  const peer = await startPeer(stack);
  const floor = await startBatchedLaneFloor(stack);
  try {
    for (const mode of PEER_MODES) await peer.measure(mode, Math.min(jobs, 1000), concurrency);
    for (const batch of LANE_FLOOR_BATCHES) await floor.measure(batch, Math.min(jobs, 1000));
    const rounds: Round[] = [];
    for (let i = 0; i < sizes.peerRounds; i++) {
      const stream = await drainQueue(stack, jobs, `peer-stream-${i}`, concurrency, 8, 'stream');
      const claimComplete = await drainQueue(stack, jobs, `peer-cc-${i}`, concurrency, 8);
      const round: Round = { stream: tgsFigures(stream), claim_complete: tgsFigures(claimComplete) };
      for (const mode of PEER_MODES) round[mode] = await peer.measure(mode, jobs, concurrency);
      for (const batch of LANE_FLOOR_BATCHES) round[`lane-floor-${batch}`] = await floor.measure(batch, jobs);
      stack.log(`peer round ${i + 1}: ${Object.entries(round).map(([k, v]) => `${k} ${v.per_s}/s ${v.machine_ms_per_task} ms`).join(', ')}`);
      rounds.push(round);
    }
    return { jobs, concurrency, peer: 'graphile-worker', peer_version: peer.version, ...summarize(rounds) };
  } finally {
    await floor.stop();
    await peer.stop();
  }
}

/** The floor the ratios take: the first of LANE_FLOOR_BATCHES, 500 a batch, as graphile-worker's local queue. */
const LANE_FLOOR = `lane-floor-${LANE_FLOOR_BATCHES[0]}`;

type Figures = { per_s: number; machine_ms_per_task: number; cpu_ms_per_task: Record<string, number>; per_task?: Record<string, number> };
type Round = Record<string, Figures>;

const tgsFigures = (d: Awaited<ReturnType<typeof drainQueue>>): Figures => ({
  per_s: d.perS, machine_ms_per_task: d.machineMsPerTask, cpu_ms_per_task: d.cpu, per_task: d.counts,
});

/**
 * Each measured thing's median over the rounds (tasks a second, machine CPU per task; the CPU by process of the round
 * with the median tasks a second), and the ratios the goals name, each the median of the rounds' ratios: tgs's
 * worker stream's tasks a second ÷ the default equal-work peer's (goal ≥ 1.2) and its CPU per task ÷ that peer's
 * (≤ 1) and ÷ the batched equal-work peer's (the batched lane's goal: ≤ 3); the batched lane's floor (500 a batch,
 * as the peer's local queue) ÷ the batched equal-work peer's (above 3, no design under the rules reaches that goal)
 * and the stream ÷ that floor (how far tgs's stream is from what any design must spend).
 */
export function summarize(rounds: Round[]) {
  const names = Object.keys(rounds[0] ?? {});
  const by: Record<string, Figures & { rounds_per_s: number[]; rounds_machine_ms_per_task: number[]; rounds_counted_ms_per_task: number[] }> = {};
  for (const name of names) {
    const each = rounds.map((r) => r[name]);
    const perS = percentile(each.map((f) => f.per_s), 50);
    const median = each.find((f) => f.per_s === perS) ?? each[0];
    by[name] = {
      ...median,
      per_s: perS,
      machine_ms_per_task: percentile(each.map((f) => f.machine_ms_per_task * 100), 50) / 100,
      rounds_per_s: each.map((f) => f.per_s),
      rounds_machine_ms_per_task: each.map((f) => f.machine_ms_per_task),
      // the processes' CPU counted, each round's: what holds when others load the machine (its busy CPU then says
      // only how long the drain took)
      rounds_counted_ms_per_task: each.map((f) => f.cpu_ms_per_task.total),
    };
  }
  const ratio = (a: string, b: string, of: (f: Figures) => number) =>
    rounds.length && rounds[0][a] && rounds[0][b] ? medianRatio(rounds.map((r) => [of(r[a]), of(r[b])])) : undefined;
  const perS = (f: Figures) => f.per_s;
  const machine = (f: Figures) => f.machine_ms_per_task;
  const counted = (f: Figures) => f.cpu_ms_per_task.total;
  return {
    figures: by,
    ratios: {
      stream_per_s_vs_default_equal: ratio('stream', 'default-equal', perS),
      stream_cpu_vs_default_equal: ratio('stream', 'default-equal', machine),
      stream_cpu_vs_batched_equal: ratio('stream', 'batched-equal', machine),
      stream_counted_cpu_vs_batched_equal: ratio('stream', 'batched-equal', counted),
      claim_complete_per_s_vs_default_equal: ratio('claim_complete', 'default-equal', perS),
      lane_floor_cpu_vs_batched_equal: ratio(LANE_FLOOR, 'batched-equal', machine),
      lane_floor_counted_cpu_vs_batched_equal: ratio(LANE_FLOOR, 'batched-equal', counted),
      stream_cpu_vs_lane_floor: ratio('stream', LANE_FLOOR, machine),
      stream_counted_cpu_vs_lane_floor: ratio('stream', LANE_FLOOR, counted),
    },
  };
}

/**
 * The peer's process, forked with a database of its own on tgs's Postgres server, and `measure(mode, jobs,
 * concurrency)`: one drain, timed by the peer (its worker pool's start to its last job's completion committed) with
 * the CPU taken around it here.
 */
async function startPeer(stack: BenchStack) {
  const database = await ownDatabase(stack, 'tgs_bench_peer');
  const stats = new pg.Client({ connectionString: database.url });
  await stats.connect();
  const child = fork('bench/peer/graphileWorker.ts', [], {
    execArgv: ['--import', 'tsx'],
    env: { ...process.env, PEER_DATABASE_URL: database.url },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  const { version } = JSON.parse(readFileSync('node_modules/graphile-worker/package.json', 'utf8')) as { version: string };
  await reply(child, 'started');
  const names = () => new Map([...stack.processNames(), [child.pid as number, 'peer (graphile-worker)']]);
  return {
    version,
    async measure(mode: PeerMode, jobs: number, concurrency: number): Promise<Figures> {
      await request(child, { type: 'prepare', mode, jobs, concurrency }, 'ready');
      const countsBefore = await databaseCounts(stats);
      const cpuBefore = cpuSnapshot(names());
      const machineBefore = machineSnapshot();
      const done = await request(child, { type: 'go' }, 'done');
      const machineMs = busyMsBetween(machineBefore, machineSnapshot());
      const cpu = cpuSince(cpuBefore, cpuSnapshot(names()), jobs);
      if (done.executed !== jobs) throw new Error(`peer ${mode}: ${done.executed} of ${jobs} jobs ran`);
      // the last commits' counts reach pg_stat_database within the collector's interval (bench/perTaskCounts.ts)
      await new Promise((r) => setTimeout(r, 1100));
      const countsAfter = await databaseCounts(stats);
      const per = (x: number) => Math.round((x / jobs) * 100) / 100;
      return {
        per_s: Math.round(jobs / done.seconds),
        machine_ms_per_task: Math.round((machineMs / jobs) * 100) / 100,
        cpu_ms_per_task: cpu,
        per_task: { pg_transactions: per(countsAfter.xacts - countsBefore.xacts), pg_rows_written: per(countsAfter.rows - countsBefore.rows) },
      };
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        const exited = new Promise((r) => child.once('exit', r));
        child.send({ type: 'exit' } satisfies PeerRequest);
        await Promise.race([exited, new Promise((r) => setTimeout(r, 5000))]);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      await stats.end();
      await database.drop();
    },
  };
}

function reply<T extends PeerReply['type']>(child: ChildProcess, type: T): Promise<Extract<PeerReply, { type: T }>> {
  return new Promise((resolve, reject) => {
    const onExit = (code: number | null) => reject(new Error(`the peer's process exited (${code}) while the bench waited for '${type}'`));
    child.once('exit', onExit);
    child.once('message', (message: PeerReply) => {
      child.off('exit', onExit);
      if (message.type === type) resolve(message as Extract<PeerReply, { type: T }>);
      else reject(new Error(message.type === 'error' ? `the peer failed: ${message.message}` : `the peer answered '${message.type}', not '${type}'`));
    });
  });
}

function request<T extends PeerReply['type']>(child: ChildProcess, message: PeerRequest, answer: T) {
  const answered = reply(child, answer);
  child.send(message);
  return answered;
}
