// A task-graph file's text as the clients read it (`tgs graph submit|extend|amend`, `tgs dev`, the web UI's Amend):
// JSON, or YAML for .yml/.yaml and anything that is not JSON, with its `defaults` applied; and what a client fills
// into each task before sending it (`$fromNow`, created, deadline, metadata). No Node imports: the UI bundles it.
import { parse as parseYaml } from 'yaml';
import { DurationError, parseDuration } from '../duration.js';

/** A node of a graph file as far as the defaults look into it (the CLI's TaskGraphNode is one). */
export interface FileNode {
  task: Record<string, unknown>;
}

/** json-e's `$fromNow`: `"2 hours"`, `"1 day 30 minutes"`, `"-15 min"` → an ISO date relative to `now`. */
export function fromNow(spec: string, now: number): string {
  try {
    return new Date(now + parseDuration(spec)).toISOString();
  } catch (err) {
    if (!(err instanceof DurationError)) throw err;
    if (err.unknownUnit !== undefined) {
      throw new Error(`{"$fromNow": ${JSON.stringify(spec)}}: unknown unit ${JSON.stringify(err.unknownUnit)} (use seconds, minutes, hours, days, weeks, months or years)`);
    }
    throw new Error(`{"$fromNow": ${JSON.stringify(spec)}}: write a duration like "2 hours" or "1 day 30 minutes"`);
  }
}

/** Replaces every `{"$fromNow": "<duration>"}` in the value. */
function resolveFromNow(value: unknown, now: number): unknown {
  if (Array.isArray(value)) return value.map((v) => resolveFromNow(v, now));
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length === 1 && keys[0] === '$fromNow' && typeof record.$fromNow === 'string') return fromNow(record.$fromNow, now);
  return Object.fromEntries(keys.map((k) => [k, resolveFromNow(record[k], now)]));
}

/**
 * What the CLI adds to a graph file before submitting it, so example files need no timestamps:
 * `{"$fromNow": "..."}` anywhere becomes a date; a task without `created` gets now, without `deadline` now + 1 day;
 * missing `metadata` fields become the label, the graph's description/owner, and `source` the graph's page.
 */
export function withTaskDefaults<N extends FileNode>(
  tasks: Record<string, N>,
  defaults: { now: number; owner: string; source: string; description?: string },
): Record<string, N> {
  // entries, not assignments: a label may be "__proto__"
  const out: [string, N][] = [];
  for (const [label, node] of Object.entries(resolveFromNow(tasks, defaults.now) as Record<string, N>)) {
    if (node === null || typeof node !== 'object' || node.task === null || typeof node.task !== 'object' || Array.isArray(node.task)) {
      out.push([label, node]); // the server names the label and what is wrong with it
      continue;
    }
    const task = { ...node.task };
    task.created ??= new Date(defaults.now).toISOString();
    task.deadline ??= new Date(defaults.now + 86400_000).toISOString();
    const metadata = typeof task.metadata === 'object' && task.metadata !== null ? (task.metadata as Record<string, unknown>) : {};
    task.metadata = {
      name: label,
      description: defaults.description ?? `task ${label}`,
      owner: defaults.owner,
      source: defaults.source,
      ...metadata,
    };
    out.push([label, { ...node, task }]);
  }
  return Object.fromEntries(out);
}

/**
 * A graph (or extension) file's text, named `name` in errors: JSON, or YAML when the name ends in .yml/.yaml or the
 * text is not JSON; its `defaults` applied. Throws an error that says what the file must hold.
 */
export function parseGraphText(text: string, name: string): Record<string, unknown> {
  let value: unknown;
  const yaml = /\.ya?ml$/i.test(name);
  try {
    value = yaml ? parseYaml(text) : JSON.parse(text);
  } catch (jsonErr) {
    if (yaml) throw new Error(`${name} is not valid YAML: ${(jsonErr as Error).message}`);
    try {
      value = parseYaml(text);
    } catch {
      throw new Error(`${name} is not valid JSON: ${(jsonErr as Error).message}`);
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value) || typeof (value as { tasks?: unknown }).tasks !== 'object') {
    throw new Error(`${name} must hold an object with "tasks": {"<label>": {"requires": [...], "reruns": N, "task": {...}}} (the task-graph format, docs/formats.md)`);
  }
  return applyDefaults(name, value as Record<string, unknown>);
}

const isPlainObject = (v: unknown): v is Record<string, unknown> => v !== null && typeof v === 'object' && !Array.isArray(v);

/** `defaults` under `own`: objects merged key by key (at every depth), anything else (arrays too) taken from `own`. */
export function mergeDefaults(defaults: Record<string, unknown>, own: Record<string, unknown>): Record<string, unknown> {
  const out: [string, unknown][] = Object.entries(defaults).filter(([k]) => !Object.hasOwn(own, k));
  for (const [k, v] of Object.entries(own)) out.push([k, isPlainObject(v) && isPlainObject(defaults[k]) ? mergeDefaults(defaults[k], v) : v]);
  // entries, not assignments: a key may be "__proto__"
  return Object.fromEntries(out);
}

/**
 * A graph file's `defaults` (a file feature: the API never sees it): task fields every task gets unless it sets them
 * itself, merged into objects such as `payload` key by key, e.g. `defaults: {provisionerId: tgs-dev, workerType:
 * shell, payload: {maxRunTime: 600}}`.
 */
function applyDefaults(name: string, graph: Record<string, unknown>): Record<string, unknown> {
  if (!('defaults' in graph)) return graph;
  const { defaults, tasks, ...rest } = graph;
  if (!isPlainObject(defaults)) throw new Error(`${name}: "defaults" must be an object of task fields every task gets (e.g. {"provisionerId": "tgs-dev", "workerType": "shell"})`);
  const merged = Object.entries(tasks as Record<string, unknown>).map(([label, node]) =>
    [label, isPlainObject(node) && isPlainObject(node.task) ? { ...node, task: mergeDefaults(defaults, node.task) } : node] as const,
  );
  return { ...rest, tasks: Object.fromEntries(merged) };
}
