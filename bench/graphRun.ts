import slugid from 'slugid';
import { eventually } from '../support/stack.js';
import { startFastWorker } from '../support/fastWorker.js';
import type { graphOf } from '../support/graphs.js';
import type { BenchStack } from './scenario.js';

/**
 * How the fast worker claims and reports in the graph scenarios (throughput and scale, so the two compare graph sizes
 * alone): `stream`, over the worker stream (claims pushed, the reports of a tick in one frame, docs/api.md § The
 * worker stream); `batched`, claimWork (4 a call) and each claim's runs in one reportResolutions call; `single`,
 * claimWork and one Taskcluster report per run. TGS_BENCH_GRAPH_TRANSPORT picks another to compare; the queue scenario
 * measures all of them.
 */
export const GRAPH_TRANSPORT = graphTransport(process.env.TGS_BENCH_GRAPH_TRANSPORT);

function graphTransport(value: string | undefined): 'stream' | 'batched' | 'single' {
  if (value === undefined || value === '') return 'stream';
  if (value === 'stream' || value === 'batched' || value === 'single') return value;
  throw new Error(`TGS_BENCH_GRAPH_TRANSPORT=${value}: use stream, batched or single`);
}

/**
 * Runs a graph to the end with a fast worker of `concurrency` claimers (claiming 4 at a time; on the stream, a
 * capacity of 4 × `concurrency`) on `workerType`, as GRAPH_TRANSPORT says: when it was submitted, when it finished,
 * and the phases in between (seconds after the submission began).
 */
export async function graphRun(
  stack: BenchStack,
  graph: ReturnType<typeof graphOf>,
  concurrency: number,
  workerType: string,
  options: { onSubmitted?: () => void } = {},
) {
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = workerType;
  const reportTimes: number[] = [];
  const worker = startFastWorker({
    rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType, concurrency, batch: 4,
    batchReports: GRAPH_TRANSPORT === 'batched', transport: GRAPH_TRANSPORT === 'stream' ? 'stream' : 'claimWork',
    onReport: () => reportTimes.push(performance.now()),
  });
  const id = slugid.nice();
  const t0 = performance.now();
  await stack.root.request('scheduler', 'PUT', `/task-graph/${id}`, graph);
  const submitted = performance.now();
  options.onSubmitted?.();
  let lastLog = 0;
  await eventually(async () => {
    const state = (await stack.root.request('scheduler', 'GET', `/task-graph/${id}/status`)).status.state;
    if (performance.now() - lastLog > 10_000) {
      lastLog = performance.now();
      stack.log(`  ${id}: ${state}, ${worker.reported.length} tasks reported`);
    }
    return state === 'finished';
  }, `graph ${id} finished`, 3_600_000);
  const finished = performance.now();
  await worker.stop();
  const at = (t: number | undefined) => (t === undefined ? NaN : Math.round(t - t0) / 1000);
  // where the time goes: submit, then the first task's report, the bulk of the reports, the last one, finished
  const phases = {
    submitted_s: at(submitted), first_report_s: at(reportTimes[0]), median_report_s: at(reportTimes[Math.floor(reportTimes.length / 2)]),
    second_last_report_s: at(reportTimes.at(-2)), last_report_s: at(reportTimes.at(-1)), finished_s: at(finished),
  };
  return { id, submitS: (submitted - t0) / 1000, finishS: (finished - t0) / 1000, phases };
}
