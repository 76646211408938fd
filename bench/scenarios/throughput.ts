import { graphOf } from '../../support/graphs.js';
import { cpuSince, cpuSnapshot } from '../cpu.js';
import { BATCH_REPORTS, graphRun } from '../graphRun.js';
import type { BenchStack, Sizes } from '../scenario.js';
import { countSnapshot, perTask } from '../perTaskCounts.js';

/** A wide graph (1 → n-2 → 1) run to the end with 16 claimers: tasks a second, and CPU per task by process. */
export async function run(stack: BenchStack, sizes: Sizes) {
  const n = sizes.throughput;
  stack.log(`throughput: ${n}-task graph (1 → ${n - 2} → 1), reports ${BATCH_REPORTS ? 'batched per claim' : 'one call each'}`);
  const nodes: Record<string, { requires?: string[] }> = { root: {} };
  const middle = Array.from({ length: n - 2 }, (_, i) => `m${i}`);
  middle.forEach((m) => (nodes[m] = { requires: ['root'] }));
  nodes.sink = { requires: middle };
  const counts = await countSnapshot(stack);
  const cpuBefore = cpuSnapshot(stack.processNames());
  const result = await graphRun(stack, graphOf(nodes, 'bench'), 16, 'throughput', { batchReports: BATCH_REPORTS });
  const cpuAfter = cpuSnapshot(stack.processNames());
  return {
    tasks: n, batch_reports: BATCH_REPORTS, seconds: Math.round(result.finishS * 10) / 10, tasks_per_s: Math.round(n / result.finishS), phases: result.phases,
    cpu_ms_per_task: cpuSince(cpuBefore, cpuAfter, n),
    per_task: await perTask(stack, counts, n, result.id),
  };
}
