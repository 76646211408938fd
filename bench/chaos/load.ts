import { fastTask } from '../../support/graphs.js';

/**
 * The graphs a chaos run submits, each with a script its tasks follow: how many times a task fails before it
 * completes (`payload.chaos.failTimes`) and how long it "runs". The script decides what the end state must be,
 * so the checks know, per task, the runs it must have and, per graph, whether it finishes or blocks and where.
 */
export const WORKER_TYPE = 'chaos';
export const PROVISIONER = 'tgs-chaos';
/** failTimes of a task scripted to fail for good: more than any reruns a graph gives it */
export const FOREVER = 99;

export type Shape = 'chain' | 'fan' | 'layered';

export interface NodeScript {
  label: string;
  requires: string[];
  reruns: number;
  failTimes: number;
}

export interface GraphPlan {
  id: string;
  shape: Shape;
  nodes: NodeScript[];
  /** what the graph's state must be at the end */
  expected: 'finished' | 'blocked';
  /** labels that must end failed (the graph blocks there) */
  failsForGood: string[];
  /** labels that must never run: downstream of a task that fails for good */
  neverRuns: Set<string>;
}

/** A small deterministic generator, so a run's scripts are the same for the same seed. */
export function rng(seed: number): () => number {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 2 ** 32;
  };
}

function shapeNodes(shape: Shape, size: number): { label: string; requires: string[] }[] {
  if (shape === 'chain') {
    // parallel chains of at most 25: one hop costs up to seconds on a loaded 2-core machine, and a
    // 100-task chain alone then outlasted the rest of a full run by minutes
    const length = Math.min(size, 25);
    return Array.from({ length: size }, (_, i) => ({ label: `c${i}`, requires: i % length ? [`c${i - 1}`] : [] }));
  }
  if (shape === 'fan') {
    const middle = Array.from({ length: Math.max(1, size - 2) }, (_, i) => ({ label: `m${i}`, requires: ['root'] }));
    return [{ label: 'root', requires: [] }, ...middle, { label: 'sink', requires: middle.map((m) => m.label) }];
  }
  // layers of `width`, each task requiring two of the layer before
  const width = Math.max(2, Math.round(Math.sqrt(size * 2)));
  const layers = Math.max(2, Math.round(size / width));
  const out: { label: string; requires: string[] }[] = [];
  for (let l = 0; l < layers; l++) {
    for (let w = 0; w < width; w++) {
      const requires = l === 0 ? [] : [...new Set([`l${l - 1}-${w}`, `l${l - 1}-${(w + 3) % width}`])];
      out.push({ label: `l${l}-${w}`, requires });
    }
  }
  return out;
}

/**
 * Graph number `n` of a run: shapes in turn; about 4% of tasks fail once (reruns 1) and 1% twice
 * (reruns 2); every `blockEvery`-th graph has one task, in its middle, that fails for good (reruns 0).
 */
export function planGraph(id: string, n: number, size: number, random: () => number, blockEvery = 10): GraphPlan {
  const shape = (['chain', 'fan', 'layered'] as const)[n % 3];
  const nodes: NodeScript[] = shapeNodes(shape, size).map(({ label, requires }) => {
    const r = random();
    if (r < 0.01) return { label, requires, reruns: 2, failTimes: 2 };
    if (r < 0.05) return { label, requires, reruns: 1, failTimes: 1 };
    return { label, requires, reruns: r < 0.1 ? 1 : 0, failTimes: 0 };
  });
  const failsForGood: string[] = [];
  if (n % blockEvery === blockEvery - 1) {
    const victim = nodes[Math.floor(nodes.length / 2)];
    victim.failTimes = FOREVER;
    victim.reruns = 0;
    failsForGood.push(victim.label);
  }
  // everything downstream of a task that fails for good stays unscheduled
  const dependents = new Map<string, string[]>();
  for (const node of nodes) for (const r of node.requires) dependents.set(r, [...(dependents.get(r) ?? []), node.label]);
  const neverRuns = new Set<string>();
  const stack = failsForGood.flatMap((l) => dependents.get(l) ?? []);
  while (stack.length) {
    const label = stack.pop() as string;
    if (neverRuns.has(label)) continue;
    neverRuns.add(label);
    stack.push(...(dependents.get(label) ?? []));
  }
  return { id, shape, nodes, expected: failsForGood.length ? 'blocked' : 'finished', failsForGood, neverRuns };
}

/** The runs a task must end with, by its script: failed ones then a completed one (or only failed ones). */
export function expectedRuns(node: NodeScript, neverRuns: Set<string>): ('completed' | 'failed')[] {
  if (neverRuns.has(node.label)) return [];
  if (node.failTimes > node.reruns) return Array.from({ length: node.reruns + 1 }, () => 'failed');
  return [...Array.from({ length: node.failTimes }, () => 'failed' as const), 'completed'];
}

/** The createTaskGraph body for a plan. */
export function graphBody(plan: GraphPlan, random: () => number, taskMaxMs: number) {
  return {
    routing: 'chaos',
    tasks: Object.fromEntries(
      plan.nodes.map((n) => {
        const task = fastTask(`${plan.id}/${n.label}`, ['completed'], { chaos: { failTimes: n.failTimes, sleepMs: Math.floor(random() * taskMaxMs) } });
        return [n.label, { requires: n.requires, reruns: n.reruns, task: { ...task, provisionerId: PROVISIONER, workerType: WORKER_TYPE, retries: 5 } }];
      }),
    ),
  };
}
