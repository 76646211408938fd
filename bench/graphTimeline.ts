// Where one graph's time goes, event by event: the throughput scenario's graph (1 → n-2 → 1) run on the bench's
// stack (the tgs processes as deployed, bench/stack.ts) `rounds` times, each after bench/settle.ts's VACUUM (ANALYZE);
// the first round warms the processes up. Each round prints its phases (submit, the root's report, the second report
// — the dispatch of the middle — the median and the last report) and CPU per task per process; the last round also
// prints its workflow's history, each event in seconds after the submit began: when the workflow started, each
// loadNodes page, each signal of resolutions and the workflow task that took it, each dispatch (a local activity
// marker, recorded when its workflow task completes). Not part of `npm run bench`:
// `node --import tsx bench/graphTimeline.ts [tasks] [rounds]` (default 10000 2), from a built tree.
import protoModule from '@temporalio/proto';
import { benchPostgresUrl } from './pgSocket.js';
import { startBenchStack } from './stack.js';
import { settle } from './settle.js';
import { cpuSince, cpuSnapshot } from './cpu.js';
import { graphRun } from './graphRun.js';
import { graphOf } from '../support/graphs.js';
import { workflowIdFor } from '../src/workflows/contract.js';

const [tasks = 10_000, rounds = 2] = process.argv.slice(2).map(Number);
const log = (line: string) => console.error(`[timeline ${new Date().toISOString().slice(11, 19)}] ${line}`);
const stack = await startBenchStack({ separateProcesses: true, postgresUrl: benchPostgresUrl(), log });
const eventName = (type: unknown) => String(protoModule.temporal.api.enums.v1.EventType[type as number] ?? type).replace(/^EVENT_TYPE_/, '');
try {
  for (let round = 1; round <= rounds; round++) {
    await settle(stack);
    const nodes: Record<string, { requires?: string[] }> = { root: {} };
    const middle = Array.from({ length: tasks - 2 }, (_, i) => `m${i}`);
    for (const m of middle) nodes[m] = { requires: ['root'] };
    nodes.sink = { requires: middle };
    const cpuBefore = cpuSnapshot(stack.processNames());
    const startedAt = Date.now();
    const result = await graphRun(stack, graphOf(nodes, 'timeline'), 16, 'timeline', { batchReports: true });
    const cpu = cpuSince(cpuBefore, cpuSnapshot(stack.processNames()), tasks);
    console.log(`round ${round}: ${Math.round(tasks / result.finishS)} tasks/s, phases ${JSON.stringify(result.phases)}`);
    console.log(`  CPU ms per task ${JSON.stringify(cpu)}`);
    if (round < rounds) continue;
    const history = await stack.client.workflow.getHandle(workflowIdFor(result.id)).fetchHistory();
    for (const event of history.events ?? []) {
      const at = Number(event.eventTime?.seconds ?? 0) * 1000 + Math.floor((event.eventTime?.nanos ?? 0) / 1e6) - startedAt;
      const what = event.activityTaskScheduledEventAttributes?.activityType?.name ?? event.markerRecordedEventAttributes?.markerName ?? '';
      console.log(`  ${(at / 1000).toFixed(3).padStart(7)} s  #${event.eventId} ${eventName(event.eventType)} ${what}`);
    }
  }
} finally {
  await stack.stop();
}
process.exit(0);
