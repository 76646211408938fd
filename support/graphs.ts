/** Task definitions for tests: a fast-worker task whose payload says how each run ends. */
export function fastTask(name: string, outcomes: string[] = ['completed'], extra: Record<string, unknown> = {}) {
  const now = Date.now();
  return {
    provisionerId: 'tgs-test',
    workerType: 'fast',
    created: new Date(now).toISOString(),
    deadline: new Date(now + 60 * 60 * 1000).toISOString(),
    payload: { outcomes, ...extra },
    metadata: { name, description: `test task ${name}`, owner: 'tests@example.com', source: 'https://example.com/tgs' },
  };
}

export function graphOf(nodes: Record<string, { requires?: string[]; reruns?: number; outcomes?: string[]; payload?: Record<string, unknown> }>, routing = 'tests') {
  return {
    routing,
    tasks: Object.fromEntries(
      Object.entries(nodes).map(([label, n]) => [
        label,
        { requires: n.requires ?? [], reruns: n.reruns ?? 0, task: fastTask(label, n.outcomes, n.payload) },
      ]),
    ),
  };
}

/**
 * `layers` × `width` tasks, each requiring `fanIn` of the layer above (fewer where they coincide), on the worker
 * pool `workerType` (also the graph's routing). Nobody claims them unless a worker of that type runs.
 */
export function layeredGraph(layers: number, width: number, workerType: string, fanIn = 4) {
  const nodes: Record<string, { requires?: string[] }> = {};
  let edges = 0;
  for (let l = 0; l < layers; l++) {
    for (let w = 0; w < width; w++) {
      const requires = l === 0 ? [] : [...new Set(Array.from({ length: fanIn }, (_, k) => `l${l - 1}-${(w + k * 7) % width}`))];
      edges += requires.length;
      nodes[`l${l}-${w}`] = { requires };
    }
  }
  const graph = graphOf(nodes, workerType);
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = workerType;
  return { graph, edges };
}
