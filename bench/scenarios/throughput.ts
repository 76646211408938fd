import { graphOf } from '../../support/graphs.js';
import { cpuSince, cpuSnapshot } from '../cpu.js';
import { GRAPH_TRANSPORT, graphRun } from '../graphRun.js';
import type { BenchStack, Sizes } from '../scenario.js';
import { countSnapshot, perTask } from '../perTaskCounts.js';
import { busyMsBetween, coresBetween, machineSnapshot, type MachineSnapshot } from '../machineCpu.js';

/** A wide graph (1 → n-2 → 1) run to the end with 16 claimers: tasks a second, and CPU per task by process. */
export async function run(stack: BenchStack, sizes: Sizes) {
  const n = sizes.throughput;
  stack.log(`throughput: ${n}-task graph (1 → ${n - 2} → 1), worker on ${GRAPH_TRANSPORT === 'stream' ? 'the worker stream' : GRAPH_TRANSPORT === 'batched' ? 'claimWork, reports batched per claim' : 'claimWork, one report a run'}`);
  const nodes: Record<string, { requires?: string[] }> = { root: {} };
  const middle = Array.from({ length: n - 2 }, (_, i) => `m${i}`);
  middle.forEach((m) => (nodes[m] = { requires: ['root'] }));
  nodes.sink = { requires: middle };
  const counts = await countSnapshot(stack);
  const cpuBefore = cpuSnapshot(stack.processNames());
  const machineBefore = machineSnapshot();
  let machineSubmitted: MachineSnapshot = machineBefore;
  const result = await graphRun(stack, graphOf(nodes, 'bench'), 16, 'throughput', { onSubmitted: () => (machineSubmitted = machineSnapshot()) });
  const cpuAfter = cpuSnapshot(stack.processNames());
  const machineAfter = machineSnapshot();
  return {
    tasks: n, transport: GRAPH_TRANSPORT, seconds: Math.round(result.finishS * 10) / 10, tasks_per_s: Math.round(n / result.finishS), phases: result.phases,
    cpu_ms_per_task: cpuSince(cpuBefore, cpuAfter, n),
    // the machine's cores, busy / waiting on the disk / idle, during the submit and from its answer to the end
    cores_submit: coresBetween(machineBefore, machineSubmitted),
    cores_run: coresBetween(machineSubmitted, machineAfter),
    // all the machine's busy CPU per task, the stack's processes and the rest (cpu_ms_per_task counts only the former)
    machine_busy_ms_per_task: Math.round((busyMsBetween(machineBefore, machineAfter) / n) * 100) / 100,
    per_task: await perTask(stack, counts, n, result.id),
  };
}
