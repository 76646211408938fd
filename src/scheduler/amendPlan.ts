/**
 * The classification of an amend (docs/formats.md § Amend), pure: each label of the edited graph file against the
 * node the graph holds under it, by their digests (src/scheduler/nodeDigests.ts).
 */

/** A member node as stored. Digests are hex, absent for nodes stored before migration 037. */
export interface StoredNode {
  label: string;
  idx: number;
  taskId: string;
  digest?: string;
  workDigest?: string;
  /** the queue state of its task */
  state: string;
}

/** A node of the edited file: its digests and the labels it depends on (requires and `$subs`). */
export interface IncomingNode {
  label: string;
  digest: string;
  workDigest: string;
  dependsOn: string[];
}

export type AmendClass = 'unchanged' | 'metadata' | 'changed' | 'added' | 'dependent' | 'removed';

export interface AmendPlan {
  /** per label of either side: what the amend does with it */
  classes: Map<string, AmendClass>;
  /** labels that get a new task: changed, added, and dependents of a changed label */
  replaced: string[];
  /** labels whose stored task is patched in place (metadata only, and not a dependent of a changed label) */
  patched: string[];
  /** stored labels the file no longer has */
  removed: string[];
}

/**
 * Classifies every label: `unchanged` (same digest), `metadata` (same work digest), `changed` (another work digest,
 * or no stored digest), `added`, `removed`; then every label that depends, directly or not, on a changed or added one
 * is `dependent`: its task is replaced too (its definition names the taskIds of what it requires, and what it reads
 * changed). A cached dependent whose key comes out the same is looked up as any cached node is when it becomes ready,
 * so it reuses the run it replaces instead of running.
 */
export function planAmend(stored: readonly StoredNode[], incoming: readonly IncomingNode[]): AmendPlan {
  const byLabel = new Map(stored.map((n) => [n.label, n]));
  const classes = new Map<string, AmendClass>();
  for (const node of incoming) {
    const old = byLabel.get(node.label);
    if (!old) classes.set(node.label, 'added');
    else if (old.digest === node.digest) classes.set(node.label, 'unchanged');
    else if (old.workDigest !== undefined && old.workDigest === node.workDigest) classes.set(node.label, 'metadata');
    else classes.set(node.label, 'changed');
  }
  const dependents = new Map<string, string[]>();
  for (const node of incoming) {
    for (const d of node.dependsOn) {
      const list = dependents.get(d);
      if (list) list.push(node.label);
      else dependents.set(d, [node.label]);
    }
  }
  const queue = [...classes].filter(([, c]) => c === 'changed' || c === 'added').map(([label]) => label);
  while (queue.length > 0) {
    const label = queue.pop() as string;
    for (const d of dependents.get(label) ?? []) {
      const c = classes.get(d);
      if (c === 'unchanged' || c === 'metadata') {
        classes.set(d, 'dependent');
        queue.push(d);
      }
    }
  }
  const removed = stored.filter((n) => !classes.has(n.label)).map((n) => n.label);
  for (const label of removed) classes.set(label, 'removed');
  const replaced = incoming.filter((n) => ['changed', 'added', 'dependent'].includes(classes.get(n.label) as string)).map((n) => n.label);
  const patched = incoming.filter((n) => classes.get(n.label) === 'metadata').map((n) => n.label);
  return { classes, replaced, patched, removed };
}

/** The labels of each class, sorted (the answer and the amend's history row); `unchanged` as a count. */
export function summarize(plan: AmendPlan): Record<Exclude<AmendClass, 'unchanged'>, string[]> & { unchanged: number } {
  const out = { changed: [] as string[], metadata: [] as string[], added: [] as string[], dependent: [] as string[], removed: [] as string[], unchanged: 0 };
  for (const [label, c] of plan.classes) {
    if (c === 'unchanged') out.unchanged++;
    else out[c].push(label);
  }
  for (const list of [out.changed, out.metadata, out.added, out.dependent, out.removed]) list.sort();
  return out;
}

/** A dependent the early cutoff may keep: the task it replaces, and the replaced labels it requires with their old taskIds. */
export interface CutoffCandidate {
  from: string;
  inputs: { label: string; old: string }[];
}

/** Nodes visited in all, looking up the requires for inputs named only in `$subs` (a 100,000-node graph's worth). */
const WALK_BUDGET = 100_000;

/**
 * The dependents the early cutoff may keep (docs/formats.md § Early cutoff): those whose stored task completed (what
 * it read then is known) and whose every replaced input (a label it requires or names in `$subs`) is among what it
 * requires, directly or not, so that the input's new run has resolved before the dependent is ready and its outputs
 * can be compared. Nodes stored before digests were kept are `changed`, never dependents, so they are not candidates.
 */
export function cutoffCandidates(plan: AmendPlan, stored: readonly StoredNode[], incoming: readonly IncomingNode[], requiresOf: (label: string) => readonly string[]): Map<string, CutoffCandidate> {
  const byLabel = new Map(stored.map((n) => [n.label, n]));
  const replaced = new Set(plan.replaced);
  // A label named only in `$subs` must be found up the requires: a walk a candidate, all of them together bounded
  // (the common case, every input required directly, walks nothing; past the budget such a dependent just runs).
  let budget = WALK_BUDGET;
  const requiredUpstream = (label: string, wanted: Set<string>): boolean => {
    const seen = new Set<string>();
    const stack = [...requiresOf(label)];
    while (stack.length > 0 && wanted.size > 0 && budget-- > 0) {
      const next = stack.pop() as string;
      if (seen.has(next)) continue;
      seen.add(next);
      wanted.delete(next);
      stack.push(...requiresOf(next));
    }
    return wanted.size === 0;
  };
  const out = new Map<string, CutoffCandidate>();
  for (const node of incoming) {
    const old = byLabel.get(node.label);
    if (plan.classes.get(node.label) !== 'dependent' || old?.state !== 'completed') continue;
    const inputs = node.dependsOn.filter((d) => replaced.has(d));
    if (inputs.length === 0 || inputs.some((d) => !byLabel.has(d))) continue;
    const direct = new Set(requiresOf(node.label));
    const indirect = new Set(inputs.filter((d) => !direct.has(d)));
    if (indirect.size > 0 && !requiredUpstream(node.label, indirect)) continue;
    out.set(node.label, { from: old.taskId, inputs: inputs.sort().map((label) => ({ label, old: (byLabel.get(label) as StoredNode).taskId })) });
  }
  return out;
}
