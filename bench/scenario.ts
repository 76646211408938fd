import type { Stack } from '../support/stack.js';

/**
 * What every scenario under bench/scenarios/ gets: `run(stack, sizes)` measures one thing and returns its figures,
 * which bench/run.ts stores under the scenario's name.
 */

/** How big each scenario runs (`--quick` or full; `--layers`/`--width` override the scale scenario's). */
export interface Sizes {
  /** tasks in the hop scenario's chain */
  chain: number;
  /** hops of the bare Temporal floor (the queue floor does at most 100) */
  floorHops: number;
  /** tasks of the throughput graph (1 → n-2 → 1) */
  throughput: number;
  /** the scale scenario's layered DAG: layers × width tasks, each requiring fanIn of the layer above */
  layers: number;
  width: number;
  fanIn: number;
  /** tasks drained per claim+complete measurement of the queue scenario */
  queueTasks: number;
  /** rounds of the queue scenario's batched drain and its floor, alternated */
  queueRounds: number;
  /** no-op tasks of each drain of the peer scenario (tgs's and the peer's, bench/scenarios/peer.ts), and its rounds */
  peerJobs: number;
  peerRounds: number;
  /** graph sizes the UI scenario opens, and the one it also feeds live changes to */
  uiTasks: number[];
  uiLiveTasks: number;
}

export const QUICK_SIZES: Sizes = {
  chain: 20, floorHops: 20, throughput: 500, layers: 10, width: 100, fanIn: 3, queueTasks: 300, queueRounds: 1, peerJobs: 300, peerRounds: 1, uiTasks: [1000], uiLiveTasks: 1000,
};
export const FULL_SIZES: Sizes = {
  chain: 200, floorHops: 200, throughput: 10_000, layers: 100, width: 1000, fanIn: 4, queueTasks: 5000, queueRounds: 3, peerJobs: 20_000, peerRounds: 2,
  uiTasks: [1000, 10_000, 30_000, 100_000], uiLiveTasks: 30_000,
};

/**
 * The test stack (support/stack.ts) as the bench runs it: `api.rootUrl` and `root` point at the API the scenarios
 * load (a `tgs api` process unless --single-process), plus what the bench measures the processes with.
 */
export interface BenchStack extends Stack {
  /** a progress line on stderr */
  log(line: string): void;
  /** pid → name of every process whose CPU time bench/cpu.ts accounts for */
  processNames(): Map<number, string>;
  /** peak RSS of each process, MB */
  maxRssMb(): Record<string, number>;
}
