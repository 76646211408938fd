import slugid from 'slugid';
import { eventually } from '../../support/stack.js';
import { startFastWorker } from '../../support/fastWorker.js';
import { graphOf } from '../../support/graphs.js';
import type { BenchStack, Sizes } from '../scenario.js';

/**
 * Fix and go on at the throughput graph's size (1 → n-2 → 1): the graph runs to the end, then one middle node's
 * payload is amended (PUT .../amend with the whole edited file, docs/formats.md § Amend). What a user waits for: the
 * amend's answer, the first rerun claimed, the graph finished again; and how many claims the amend cost — the changed
 * node only, where rerunning the graph would cost n: the sink that requires it is kept by the early cutoff
 * (docs/formats.md § Early cutoff), since the fast worker's runs produce no artifacts and so the same outputs.
 */
export async function run(stack: BenchStack, sizes: Sizes) {
  const n = sizes.throughput;
  stack.log(`amend: ${n}-task graph (1 → ${n - 2} → 1) run to the end, then one middle node's payload amended`);
  const nodes: Record<string, { requires?: string[]; payload?: Record<string, unknown> }> = { root: {} };
  const middle = Array.from({ length: n - 2 }, (_, i) => `m${i}`);
  middle.forEach((m) => (nodes[m] = { requires: ['root'] }));
  nodes.sink = { requires: middle };
  const graph = graphOf(nodes, 'bench');
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = 'amend';
  const claims: number[] = [];
  const worker = startFastWorker({
    rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'amend', concurrency: 16, batch: 4,
    transport: 'stream', onClaim: () => claims.push(performance.now()),
  });
  const id = slugid.nice();
  const state = async () => (await stack.root.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${id}/status`)).status.state;
  try {
    await stack.root.request('scheduler', 'PUT', `/task-graph/${id}`, graph);
    await eventually(async () => (await state()) === 'finished', `graph ${id} finished`, 3_600_000);
    const claimsBefore = claims.length;
    const edited = structuredClone(graph);
    const changed = edited.tasks[middle[Math.floor(middle.length / 2)]].task as { payload: Record<string, unknown> };
    changed.payload = { ...changed.payload, amended: 1 };
    const t0 = performance.now();
    await stack.root.request('scheduler', 'PUT', `/task-graph/${id}/amend`, edited);
    const answered = performance.now();
    await eventually(async () => claims.length > claimsBefore, 'the first rerun claimed', 600_000);
    const firstClaim = claims[claimsBefore];
    await eventually(async () => (await state()) === 'finished', `graph ${id} finished again`, 3_600_000);
    const finished = performance.now();
    const ms = (t: number) => Math.round((t - t0) * 10) / 10;
    return {
      tasks: n,
      claims_first_run: claimsBefore,
      amend_answered_ms: ms(answered),
      first_rerun_claimed_ms: ms(firstClaim),
      finished_again_ms: ms(finished),
      claims_after_amend: claims.length - claimsBefore,
    };
  } finally {
    await worker.stop();
  }
}
