import type { BenchStack, Sizes } from './scenario.js';
import * as throughput from './scenarios/throughput.js';
import * as queue from './scenarios/queue.js';

/**
 * Before the scenarios: the processes' code warmed up. A `tgs` process fresh from its start runs its hot paths in
 * V8's interpreter and baseline tiers and spends part of its CPU compiling them: in a 10,000-task graph run on
 * fresh processes (perf, 2026-11-25), 18 % of the API's CPU samples were in the optimizing compiler, and the same
 * graph run again on the same processes cost 1.83-1.99 ms of CPU a task instead of 2.31. A deployment's processes
 * live for days, so the figures are taken warm: the throughput scenario runs once (its figures are kept as
 * `throughput_cold`, the first graph on fresh processes) and the queue scenario's calls once at a small size.
 */
export async function warmUp(stack: BenchStack, sizes: Sizes): Promise<unknown> {
  stack.log('warm-up: the throughput graph once on fresh processes (kept as throughput_cold), the queue calls once');
  const cold = await throughput.run(stack, sizes);
  await queue.run(stack, { ...sizes, queueTasks: Math.min(sizes.queueTasks, 1000), queueRounds: 1 });
  return cold;
}

/**
 * Before each scenario: the dead rows of the one before vacuumed away and statistics taken, so that each scenario
 * starts on the same footing whatever ran before it (autovacuum, on during the run since 2026-11-26:
 * bench/autovacuum.ts, would get there at its own pace, one `autovacuum_naptime` or more later). Without it a
 * scenario paid for the dead index entries of the ones before it (claim + complete: Postgres 1.6 → 3.4 ms a task
 * over three runs), and the named statements kept the plans they were given while their tables were nearly empty
 * (the bridge's check of stored runs read all 10,000 tasks of a table it had planned as one page).
 */
export async function settle(stack: BenchStack): Promise<void> {
  const started = performance.now();
  await stack.api.db.pool.query('VACUUM (ANALYZE)');
  stack.log(`vacuumed and analyzed in ${Math.round(performance.now() - started)} ms (each scenario starts without the dead rows of the one before)`);
}
