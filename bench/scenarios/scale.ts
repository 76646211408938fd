import { layeredGraph } from '../../support/graphs.js';
import { cpuSince, cpuSnapshot, postgresCpuSince, watchPostgres, type CpuSnapshot } from '../cpu.js';
import { graphRun } from '../graphRun.js';
import type { BenchStack, Sizes } from '../scenario.js';

async function historyStats(stack: BenchStack, taskGraphId: string) {
  let runs = 0;
  let maxEvents = 0;
  let maxBytes = 0;
  for await (const execution of stack.client.workflow.list({ query: `WorkflowId = 'task-graph/${taskGraphId}'` })) {
    runs++;
    maxEvents = Math.max(maxEvents, execution.historyLength);
    maxBytes = Math.max(maxBytes, execution.historySize ?? 0);
  }
  return { continueAsNew: Math.max(0, runs - 1), maxEvents, maxBytes };
}

/** A large layered DAG run to the end: submit and finish times, peak memory per process, workflow history size. */
export async function run(stack: BenchStack, sizes: Sizes) {
  const { layers, width, fanIn } = sizes;
  const tasks = layers * width;
  stack.log(`scale: ${tasks}-task layered DAG (${layers} layers × ${width}, fan-in ${fanIn})`);
  const { graph, edges } = layeredGraph(layers, width, 'scale', fanIn);
  let submitRss: Record<string, number> = {};
  const cpuBefore = cpuSnapshot(stack.processNames());
  let cpuSubmitted: CpuSnapshot = cpuBefore;
  const watch = watchPostgres();
  let watched: ReturnType<typeof watch.stop> | undefined;
  const graphRunResult = await graphRun(stack, graph, 16, 'scale', {
    onSubmitted: () => {
      submitRss = stack.maxRssMb();
      cpuSubmitted = cpuSnapshot(stack.processNames());
      watched = watch.stop();
    },
  });
  watched ??= watch.stop();
  const cpuAfter = cpuSnapshot(stack.processNames());
  const history = await historyStats(stack, graphRunResult.id);
  return {
    tasks, edges, submit_s: Math.round(graphRunResult.submitS * 10) / 10, finish_s: Math.round(graphRunResult.finishS * 10) / 10,
    max_rss_mb: stack.maxRssMb(),
    // the peak up to the end of the submit, apart from what running the graph adds
    submit_max_rss_mb: submitRss,
    // CPU per task of the whole run (as the throughput scenario's), and of the submit alone: what grows with the graph
    cpu_ms_per_task: cpuSince(cpuBefore, cpuAfter, tasks),
    cpu_ms_per_task_submit: cpuSince(cpuBefore, cpuSubmitted, tasks),
    // Postgres' share of it by what its processes do: the submit's own statements, or the WAL and autovacuum they cause
    cpu_ms_per_task_submit_postgres: postgresCpuSince(cpuBefore, cpuSubmitted, tasks, watched),
    continue_as_new: history.continueAsNew, max_history_events: history.maxEvents, max_history_bytes: history.maxBytes,
  };
}
