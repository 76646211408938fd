import { cacheKey, keyInputs, type CacheKeyInputs } from './key.js';
import type { CacheSpec } from './spec.js';

/** A cached node of a create or extend, held back from the intake's chunks until every key can be computed. */
export interface HeldNode {
  idx: number;
  label: string;
  spec: CacheSpec;
  /** the node's `task.payload` as submitted, its `$subs` not yet replaced */
  rawPayload: unknown;
  /** idx of each required node */
  requires: number[];
  taskQueueId: string;
  scopes: string[];
}

export interface NodeKeys {
  keys: Map<number, { key: string; inputs: CacheKeyInputs }>;
  /** [label, problem] */
  errors: [string, string][];
}

/**
 * The keys of a body's cached nodes (src/taskCache/key.ts says what goes in). A key needs the keys of every node the
 * node requires or names in a `$subs`, so those must be cached too: a new node held here, or an existing node of the
 * graph (`existingKey`). Computed dependencies first, without recursion (a chain may be 300,000 nodes long).
 */
export function computeNodeKeys(
  held: HeldNode[],
  names: {
    labelAt(idx: number): string;
    slot(label: string): number;
    existingKey(idx: number): string | undefined;
    /** The payload with each `$subs` replaced by `replace(label)` (the graph format's substitution, the scheduler's). */
    substitute(payload: unknown, replace: (label: string) => unknown): unknown;
  },
): NodeKeys {
  const byIdx = new Map(held.map((n) => [n.idx, n]));
  const errors: [string, string][] = [];
  const deps = new Map<number, number[]>();
  for (const node of held) {
    const named: number[] = [];
    names.substitute(node.rawPayload, (label) => {
      named.push(names.slot(label));
      return '';
    });
    const all = [...new Set([...node.requires, ...named])];
    for (const dep of all) {
      if (byIdx.has(dep) || names.existingKey(dep) !== undefined) continue;
      const how = node.requires.includes(dep) ? 'requires' : 'names in a $subs';
      errors.push([node.label, `is cached and ${how} ${JSON.stringify(names.labelAt(dep))}, which is not: a cached node's dependencies must be cached too (their keys are part of its key)`]);
    }
    deps.set(node.idx, all);
  }
  const keys: NodeKeys['keys'] = new Map();
  if (errors.length > 0) return { keys, errors };
  const keyOf = (idx: number) => keys.get(idx)?.key ?? names.existingKey(idx);
  const state = new Map<number, 1 | 2>(); // 1: on the stack, 2: done
  for (const root of held) {
    if (state.get(root.idx) === 2) continue;
    const stack: number[] = [root.idx];
    while (stack.length > 0) {
      const idx = stack[stack.length - 1];
      const node = byIdx.get(idx) as HeldNode;
      if (state.get(idx) === 2) {
        // pushed again by a second dependent before its first push was done
        stack.pop();
        continue;
      }
      if (state.get(idx) !== 1) {
        state.set(idx, 1);
        for (const dep of deps.get(idx) ?? []) {
          if (!byIdx.has(dep) || state.get(dep) === 2) continue;
          if (state.get(dep) === 1) {
            errors.push([node.label, `its cache key depends on its own through ${JSON.stringify(names.labelAt(dep))} (a $subs cycle)`]);
            return { keys, errors };
          }
          stack.push(dep);
        }
        continue;
      }
      stack.pop();
      // An object the intake refuses in a payload (a `$subs` that is not `taskId:<label>`), so no payload text can
      // stand for a dependency's key: the string `cache-key:<key>` used before could be written literally, and a graph
      // that did so shared the key of one whose `$subs` named a task with that key (security review 2026-11-28, #7).
      const payload = names.substitute(node.rawPayload, (label) => ({ $subs: `cache-key:${keyOf(names.slot(label))}` }));
      const inputs = keyInputs({
        name: node.spec.name,
        digestData: node.spec.digestData,
        taskQueueId: node.taskQueueId,
        payload: payload ?? null,
        scopes: node.scopes,
        requires: node.requires.map((r) => keyOf(r) as string),
      });
      keys.set(idx, { key: cacheKey(inputs), inputs });
      state.set(idx, 2);
    }
  }
  return { keys, errors };
}
