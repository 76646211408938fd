// How long explaining a 300,000-task graph takes (docs/formats.md § Explanations): the bench's layered graph (300
// layers × 1,000, fan-in 4) submitted over HTTP, its workflow loaded, then the graph's and a task's explanation timed.
// Nobody claims its tasks: the first layer is pending on a queue without workers, the rest waits on it.
// Usage: node --import tsx bench/explainLarge.ts [layers]
import { startStack } from '../support/stack.js';
import { layeredGraph } from '../support/graphs.js';
import slugid from 'slugid';
import { statusQuery, workflowIdFor } from '../src/workflows/contract.js';

const layers = Number(process.argv[2] ?? 300);
const stack = await startStack();
try {
  const { graph } = layeredGraph(layers, 1000, 'explain');
  const taskGraphId = slugid.nice();
  let at = Date.now();
  const res = await fetch(`${stack.api.rootUrl}/api/scheduler/v1/task-graph/${taskGraphId}`, {
    method: 'PUT',
    headers: { 'content-type': 'application/json', authorization: (await import('../support/api.js')).hawkHeader(`${stack.api.rootUrl}/api/scheduler/v1/task-graph/${taskGraphId}`, 'PUT', stack.api.root) },
    body: JSON.stringify(graph),
  });
  if (res.status !== 200) throw new Error(`submit: ${res.status} ${(await res.text()).slice(0, 300)}`);
  await res.arrayBuffer();
  console.log(`submitted ${layers * 1000} tasks in ${((Date.now() - at) / 1000).toFixed(1)} s`);
  at = Date.now();
  const handle = stack.client.workflow.getHandle(workflowIdFor(taskGraphId));
  for (;;) {
    const s = await handle.query(statusQuery).catch(() => undefined);
    if (s && s.nodeCount === layers * 1000 && (s.counts.scheduled ?? 0) >= 1000) break;
    await new Promise((r) => setTimeout(r, 1000));
  }
  console.log(`workflow loaded in ${((Date.now() - at) / 1000).toFixed(1)} s`);
  for (let i = 0; i < 5; i++) {
    at = performance.now();
    const e = await stack.root.request<{ unresolved: number; rootCauses: { kind: string; count: number }[] }>('scheduler', 'GET', `/task-graph/${taskGraphId}/explain`);
    const graphMs = performance.now() - at;
    at = performance.now();
    await stack.root.request('queue', 'GET', `/task/${slugid.nice()}/explain`).catch(() => undefined);
    console.log(`graph explain ${graphMs.toFixed(0)} ms (unresolved ${e.unresolved}, ${e.rootCauses.map((c) => `${c.kind} ${c.count}`).join(', ')})`);
  }
  await stack.root.request('scheduler', 'POST', `/task-graph/${taskGraphId}/cancel`);
} finally {
  await stack.stop();
}
