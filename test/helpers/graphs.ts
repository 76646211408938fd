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
