/**
 * Root causes of a graph's unresolved tasks, from the workflow's model: the `explain` query, and the part of the
 * HTTP explanation (src/scheduler/explainGraph.ts) that needs the graph's structure. Pure and deterministic.
 */
import { NODE, type GraphModel } from './graphModel.js';
import type { ExplainCause, ExplainQueryResult } from './contract.js';

/** Sources in the order they claim the waiting tasks below them: a failed task explains its descendants first. */
const PRIORITY: { kind: ExplainCause['kind']; states: number[]; member: boolean }[] = [
  { kind: 'failed', states: [NODE.failed, NODE.exception], member: true },
  { kind: 'external', states: [NODE.waiting, NODE.scheduled, NODE.ready], member: false },
  { kind: 'live', states: [NODE.scheduled], member: true },
  { kind: 'rerun', states: [NODE.rerunPending, NODE.rerunDispatching], member: true },
  { kind: 'ready', states: [NODE.ready, NODE.dispatching], member: true },
];

/**
 * Every unresolved member is explained by exactly one source: itself when it is live, ready or waiting for a
 * rerun; else the first source a breadth-first walk down from the sources reaches it from, failed tasks walking
 * first, then other groups' unresolved tasks (queue-level dependencies), then live tasks. `count`: the unresolved
 * members a source explains (a live task counts itself, a failed one does not). A waiting member no source reaches
 * is `stuck`: its requirements are met in the model, yet it was never made ready. At most `limit` causes, most
 * explaining first. O(nodes + edges): 55-176 ms on a 300,000-task graph of the bench's shape with 200,000 tasks
 * unresolved (a script on a loaded 2-core machine).
 */
export function explainModel(model: GraphModel, labels: readonly string[], limit: number): ExplainQueryResult {
  const owner = new Int32Array(model.size).fill(-1);
  const count = new Map<number, number>();
  const kindOf = new Map<number, ExplainCause['kind']>();
  let waiting = 0;
  for (let i = 0; i < model.size; i++) if (model.member[i] && model.state[i] === NODE.waiting) waiting++;
  let unresolved = 0;
  for (const { kind, states, member } of PRIORITY) {
    const queue: number[] = [];
    for (let i = 0; i < model.size; i++) {
      if ((model.member[i] === 1) !== member || !states.includes(model.state[i])) continue;
      if (owner[i] !== -1) continue;
      owner[i] = i;
      kindOf.set(i, kind);
      const self = member && kind !== 'failed' ? 1 : 0;
      count.set(i, self);
      unresolved += self;
      queue.push(i);
    }
    for (let head = 0; head < queue.length; head++) {
      const from = queue[head];
      model.forEachDependent(from, (d) => {
        if (owner[d] !== -1 || model.state[d] !== NODE.waiting) return;
        owner[d] = owner[from];
        if (model.member[d]) {
          count.set(owner[from], (count.get(owner[from]) ?? 0) + 1);
          unresolved++;
        }
        queue.push(d);
      });
    }
  }
  const causes: ExplainCause[] = [];
  for (const [i, n] of count) {
    if (n === 0) continue;
    causes.push({ kind: kindOf.get(i) as ExplainCause['kind'], taskId: model.taskIds[i], label: labels[i] ?? '', count: n });
  }
  let stuck = 0;
  for (let i = 0; i < model.size; i++) if (model.member[i] && model.state[i] === NODE.waiting && owner[i] === -1) stuck++;
  if (stuck > 0) causes.push({ kind: 'stuck', taskId: '', label: '', count: stuck });
  unresolved += stuck;
  causes.sort((a, b) => b.count - a.count || (a.taskId < b.taskId ? -1 : 1));
  return {
    state: model.graphState(),
    unresolved,
    waiting,
    causes: causes.slice(0, limit),
    omittedCauses: Math.max(0, causes.length - limit),
  };
}
