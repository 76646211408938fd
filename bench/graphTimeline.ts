// Where one graph's time goes, event by event: the throughput scenario's graph (1 → n-2 → 1) run on the bench's
// stack (the tgs processes as deployed, bench/stack.ts) `rounds` times, each after bench/settle.ts's VACUUM (ANALYZE);
// the first round warms the processes up. Each round prints its phases (submit, the root's report, the second report
// — the dispatch of the middle — the median and the last report) and CPU per task per process, in all and up to the
// submit's answer; the last round also
// prints its workflow's history, each event in seconds after the submit began: when the workflow started, each
// loadNodes page, each signal of resolutions and the workflow task that took it, each dispatch (a local activity
// marker, recorded when its workflow task completes). `layered` runs the scale scenario's shape instead (tasks / 1,000
// layers of 1,000, fan-in 4), where loading the structure and continuing as new show. Not part of `npm run bench`:
// `node --import tsx bench/graphTimeline.ts [tasks] [rounds] [layered]` (default 10000 2), from a built tree.
import protoModule from '@temporalio/proto';
import { benchPostgresUrl } from './pgSocket.js';
import { startBenchStack } from './stack.js';
import { settle } from './settle.js';
import { autovacuumForRun } from './autovacuum.js';
import { cpuSince, cpuSnapshot } from './cpu.js';
import { graphRun } from './graphRun.js';
import { graphOf, layeredGraph } from '../support/graphs.js';
import { workflowIdFor } from '../src/workflows/contract.js';

const [tasks = 10_000, rounds = 2] = process.argv.slice(2, 4).map(Number);
const layered = process.argv[4] === 'layered';
const log = (line: string) => console.error(`[timeline ${new Date().toISOString().slice(11, 19)}] ${line}`);
const stack = await startBenchStack({ separateProcesses: true, postgresUrl: benchPostgresUrl(), log });
const autovacuum = await autovacuumForRun(stack.api.db.pool, log, false);
const eventName = (type: unknown) => String(protoModule.temporal.api.enums.v1.EventType[type as number] ?? type).replace(/^EVENT_TYPE_/, '');
try {
  for (let round = 1; round <= rounds; round++) {
    await settle(stack);
    const cpuBefore = cpuSnapshot(stack.processNames());
    const startedAt = Date.now();
    // the submit's share of the CPU (the API's intake and its inserts), read when the PUT answered
    let submitCpu: ReturnType<typeof cpuSince> | undefined;
    const onSubmitted = () => {
      submitCpu = cpuSince(cpuBefore, cpuSnapshot(stack.processNames()), tasks);
    };
    const graph = layered ? layeredGraph(Math.round(tasks / 1000), 1000, 'timeline').graph : fanGraph();
    const result = await graphRun(stack, graph, 16, 'timeline', { onSubmitted });
    const cpu = cpuSince(cpuBefore, cpuSnapshot(stack.processNames()), tasks);
    console.log(`round ${round}: ${Math.round(tasks / result.finishS)} tasks/s, phases ${JSON.stringify(result.phases)}`);
    console.log(`  CPU ms per task ${JSON.stringify(cpu)}`);
    console.log(`  of which the submit ${JSON.stringify(submitCpu)}`);
    if (round < rounds) continue;
    const runs: string[] = [];
    for await (const execution of stack.client.workflow.list({ query: `WorkflowId = '${workflowIdFor(result.id)}'` })) runs.unshift(execution.runId);
    for (const [r, runId] of runs.entries()) {
      console.log(`  run ${r + 1} of ${runs.length}`);
      // a few events a page: each loadNodes result is ~300 KB, and the client takes 4 MB a message
      for (let token: Uint8Array | undefined, first = true; first || (token && token.length > 0); first = false) {
        const page = await stack.client.workflowService.getWorkflowExecutionHistory({
          namespace: stack.client.options.namespace,
          execution: { workflowId: workflowIdFor(result.id), runId },
          maximumPageSize: 8,
          nextPageToken: token,
        });
        token = page.nextPageToken ?? undefined;
        for (const event of page.history?.events ?? []) {
          const at = Number(event.eventTime?.seconds ?? 0) * 1000 + Math.floor((event.eventTime?.nanos ?? 0) / 1e6) - startedAt;
          const what = event.activityTaskScheduledEventAttributes?.activityType?.name ?? event.markerRecordedEventAttributes?.markerName ?? '';
          console.log(`  ${(at / 1000).toFixed(3).padStart(7)} s  #${event.eventId} ${eventName(event.eventType)} ${what}`);
        }
      }
    }
  }
} finally {
  await autovacuum.restore();
  await stack.stop();
}

function fanGraph() {
  const nodes: Record<string, { requires?: string[] }> = { root: {} };
  const middle = Array.from({ length: tasks - 2 }, (_, i) => `m${i}`);
  for (const m of middle) nodes[m] = { requires: ['root'] };
  nodes.sink = { requires: middle };
  return graphOf(nodes, 'timeline');
}
process.exit(0);
