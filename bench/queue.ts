import slugid from 'slugid';
import { ApiClient, type TgsCredentials } from '../src/client/http.js';
import { fastTask } from '../test/helpers/graphs.js';
import { startFastWorker } from '../test/helpers/fastWorker.js';
import { percentile } from './stats.js';
import { cpuSince, cpuSnapshot } from './cpu.js';

/**
 * The queue alone, over HTTP with Hawk: enqueue → claim latency with a claimer already waiting
 * (LISTEN/NOTIFY wakes it), and claim+complete throughput with `claimers` concurrent claimers.
 */
export async function runQueueBench(options: { rootUrl: string; credentials: TgsCredentials; tasks: number; claimers: number; processNames: Map<number, string> }) {
  const api = new ApiClient(options.rootUrl, options.credentials);
  // Latency: one waiting claimer, tasks created one at a time.
  const claimedAt = new Map<string, number>();
  const latencyWorker = startFastWorker({
    rootUrl: options.rootUrl, credentials: options.credentials, provisionerId: 'tgs-test', workerType: 'qlat', concurrency: 1,
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
  // Throughput: create the tasks first, then time the claimers draining them; once claiming one task per
  // claimWork call, once claiming up to 8 (as a worker with capacity does).
  const drain = async (workerType: string, batch: number) => {
    const ids = Array.from({ length: options.tasks }, () => slugid.nice());
    for (let i = 0; i < ids.length; i += 50) {
      await Promise.all(ids.slice(i, i + 50).map((id, k) => api.request('queue', 'PUT', `/task/${id}`, { ...fastTask(`tp${i + k}`), workerType })));
    }
    const t0 = performance.now();
    const cpuBefore = cpuSnapshot(options.processNames);
    const worker = startFastWorker({ rootUrl: options.rootUrl, credentials: options.credentials, provisionerId: 'tgs-test', workerType, concurrency: options.claimers, batch });
    while (worker.reported.length < ids.length) await new Promise((r) => setTimeout(r, 20));
    const seconds = (performance.now() - t0) / 1000;
    const cpu = cpuSince(cpuBefore, cpuSnapshot(options.processNames), ids.length);
    await worker.stop();
    return { perS: Math.round(ids.length / seconds), cpu };
  };
  const single = await drain('qtp', 1);
  const batched = await drain('qtp8', 8);
  return {
    claim_p50_ms: percentile(latencies, 50),
    claim_p99_ms: percentile(latencies, 99),
    claim_complete_per_s: single.perS,
    claim_complete_batch8_per_s: batched.perS,
    // CPU milliseconds per task, by process, while draining (where the time goes)
    cpu_ms_per_task: single.cpu,
    cpu_ms_per_task_batch8: batched.cpu,
  };
}
