// The body the graph page's Amend sends: the edited file's nodes with the schema's defaults, and fresh times for the
// labels that get new tasks. Pure (node's unit tests import it: no DOM).
//
// Why times move: a file read back from the graph (GET .../file) holds each task's `created` and `deadline` as they
// were submitted, and the queue refuses a new task created more than 15 minutes ago or whose deadline has passed. So a
// label whose task will be replaced (its work edited, added, or requiring one of those, directly or not: the amend's
// own rule, src/scheduler/amendPlan.ts) gets `created` now and its `deadline` and `expires` moved by as much, keeping
// its time budget, unless the edit set them itself. A label whose edit is metadata only gets `created` now (it is
// checked like a new task's, and never patched). An unedited label keeps its node byte for byte, so it stays
// `unchanged`.
import { METADATA_FIELDS } from '../../scheduler/metadataFields.js';

export interface FileNode {
  requires?: string[];
  reruns?: number;
  task: Record<string, unknown>;
  cache?: Record<string, unknown>;
}

/** What prepareAmend made: the nodes to send, and the labels whose times it moved (to say so). */
export interface PreparedAmend {
  tasks: Record<string, FileNode>;
  retimed: string[];
}

const isObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** Equal as JSON values, whatever the order of their keys. */
export function sameJson(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((v, i) => sameJson(v, b[i]));
  if (!isObject(a) || !isObject(b)) return false;
  const keys = Object.keys(a);
  return keys.length === Object.keys(b).length && keys.every((k) => Object.hasOwn(b, k) && sameJson(a[k], b[k]));
}

/** The node as the server validates it: `requires`, `reruns` and a cache's `mode` filled in when left out. */
function withSchemaDefaults(node: FileNode): FileNode {
  if (!isObject(node)) return node;
  const out: FileNode = { ...node, requires: node.requires ?? [], reruns: node.reruns ?? 0 };
  if (isObject(node.cache)) out.cache = { ...node.cache, mode: node.cache.mode ?? 'use' };
  return out;
}

/** The node without its task's metadata fields: equal for two nodes whose difference an amend patches in place. */
function workOf(node: FileNode): unknown {
  if (!isObject(node) || !isObject(node.task)) return node;
  const task = { ...node.task };
  for (const field of METADATA_FIELDS) delete task[field];
  return { ...node, task };
}

/** The labels a node depends on: its requires, and every `{"$subs": "taskId:<label>"}` in its task. */
function dependsOn(node: FileNode): string[] {
  const names = Array.isArray(node?.requires) ? [...node.requires] : [];
  const walk = (v: unknown): void => {
    if (Array.isArray(v)) v.forEach(walk);
    else if (isObject(v)) {
      const keys = Object.keys(v);
      const m = keys.length === 1 && typeof v.$subs === 'string' ? /^taskId:(.+)$/.exec(v.$subs) : null;
      if (m) names.push(m[1]);
      else keys.forEach((k) => walk(v[k]));
    }
  };
  walk(node?.task);
  return names;
}

const readMs = (value: unknown) => (typeof value === 'string' ? Date.parse(value) : NaN);

/**
 * `edited`'s nodes against `stored` (the graph's file as read; empty when the graph could not give it), with the times
 * of the labels that get new tasks moved to `now` (see the top of this file).
 */
export function prepareAmend(stored: Record<string, FileNode>, edited: Record<string, FileNode>, now: number): PreparedAmend {
  const tasks: Record<string, FileNode> = {};
  for (const [label, node] of Object.entries(edited)) tasks[label] = withSchemaDefaults(node);
  const old = (label: string) => (Object.hasOwn(stored, label) ? withSchemaDefaults(stored[label]) : undefined);
  const replaced = new Set(Object.keys(tasks).filter((label) => {
    const before = old(label);
    return before === undefined || !sameJson(workOf(before), workOf(tasks[label]));
  }));
  const dependents = new Map<string, string[]>();
  for (const [label, node] of Object.entries(tasks)) {
    for (const name of dependsOn(node)) dependents.set(name, [...(dependents.get(name) ?? []), label]);
  }
  const queue = [...replaced];
  while (queue.length > 0) {
    for (const d of dependents.get(queue.pop() as string) ?? []) {
      if (!replaced.has(d)) {
        replaced.add(d);
        queue.push(d);
      }
    }
  }
  const retimed: string[] = [];
  for (const [label, node] of Object.entries(tasks)) {
    const before = old(label);
    // an added label's times are the file's own; an unedited one that gets no new task is sent as it is
    if (before === undefined || !isObject(node.task) || !isObject(before.task)) continue;
    if (!replaced.has(label) && sameJson(before, node)) continue;
    const task = { ...node.task };
    const created = readMs(before.task.created);
    if (task.created !== before.task.created || Number.isNaN(created)) continue;
    const shift = now - created;
    task.created = new Date(now).toISOString();
    if (replaced.has(label)) {
      for (const field of ['deadline', 'expires'] as const) {
        const at = readMs(task[field]);
        if (task[field] === before.task[field] && !Number.isNaN(at)) task[field] = new Date(at + shift).toISOString();
      }
    }
    tasks[label] = { ...node, task };
    retimed.push(label);
  }
  return { tasks, retimed: retimed.sort() };
}
