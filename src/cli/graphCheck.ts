// The mistakes `tgs graph submit` catches before the graph exists: a static lint of the file (typos get "did you
// mean"), the shell worker's payload schema for the pools shell workers serve (`--check`), and pools no worker
// ever claimed from.
import type { TaskGraphNode, TgsClient } from '../client/tgsClient.js';
import { parseShellPayload } from '../shellWorker/payload.js';
import { didYouMean } from './didYouMean.js';

export interface GraphProblems {
  /** the graph cannot be right: submit refuses it */
  errors: string[];
  /** probably wrong: submit says so and goes on */
  warnings: string[];
}

const GRAPH_KEYS = ['routing', 'scopes', 'metadata', 'tags', 'cacheMode', 'tasks', 'defaults'];
const NODE_KEYS = ['requires', 'reruns', 'task', 'cache'];
/** The pool `tgs dev` starts its shell workers on. */
export const DEV_SHELL_POOL = 'tgs-dev/shell';
/** The workerGroup shell workers report (src/shellWorker), by which `--check` knows a pool shell workers serve. */
const SHELL_WORKER_GROUP = 'tgs-shell';

/** Every label a `{"$subs": "taskId:<label>"}` in the value names. */
function subsLabels(value: unknown, out: Set<string>): Set<string> {
  if (Array.isArray(value)) for (const v of value) subsLabels(v, out);
  else if (value !== null && typeof value === 'object') {
    const record = value as Record<string, unknown>;
    if (typeof record.$subs === 'string' && record.$subs.startsWith('taskId:')) out.add(record.$subs.slice('taskId:'.length));
    else for (const v of Object.values(record)) subsLabels(v, out);
  }
  return out;
}

/** The pool (`<provisionerId>/<workerType>`) a task definition names, if it names one. */
export function poolOf(task: Record<string, unknown>): string | undefined {
  if (typeof task.taskQueueId === 'string') return task.taskQueueId;
  if (typeof task.provisionerId === 'string' && typeof task.workerType === 'string') return `${task.provisionerId}/${task.workerType}`;
  return undefined;
}

/**
 * What the file alone shows: unknown keys of the graph and its nodes and `requires` naming no label (errors, with
 * the closest known name), a `$subs` naming a label the task does not require (a warning: its task may not exist
 * yet, nor its artifacts), a task naming no pool (an error).
 */
export function lintGraph(graph: Record<string, unknown>, existingLabels: Iterable<string> = []): GraphProblems {
  const errors: string[] = [];
  const warnings: string[] = [];
  for (const key of Object.keys(graph)) {
    if (!GRAPH_KEYS.includes(key)) errors.push(`the graph has unknown property ${JSON.stringify(key)}${didYouMean(key, GRAPH_KEYS)} (docs/formats.md § Task-graph format)`);
  }
  const tasks = (graph.tasks ?? {}) as Record<string, TaskGraphNode>;
  const labels = new Set([...Object.keys(tasks), ...existingLabels]);
  for (const [label, node] of Object.entries(tasks)) {
    if (node === null || typeof node !== 'object') continue; // the server names what is wrong with it
    for (const key of Object.keys(node)) {
      if (!NODE_KEYS.includes(key)) errors.push(`${label}: unknown property ${JSON.stringify(key)}${didYouMean(key, NODE_KEYS)}`);
    }
    const requires = Array.isArray(node.requires) ? node.requires.filter((r): r is string => typeof r === 'string') : [];
    for (const r of requires) {
      if (!labels.has(r)) errors.push(`${label}: requires unknown label ${JSON.stringify(r)}${didYouMean(r, [...labels].filter((l) => l !== label))}`);
    }
    if (node.task === null || typeof node.task !== 'object') continue;
    for (const named of subsLabels(node.task, new Set())) {
      if (named === label || requires.includes(named)) continue;
      warnings.push(
        labels.has(named)
          ? `${label}: $subs names ${JSON.stringify(named)}, which it does not require: it may run before ${named} exists or has its artifacts (add "${named}" to requires)`
          : `${label}: $subs names unknown label ${JSON.stringify(named)}${didYouMean(named, labels)}`,
      );
    }
    if (!poolOf(node.task)) errors.push(`${label}: the task names no pool: give provisionerId and workerType (tgs dev's shell workers serve ${DEV_SHELL_POOL}) or taskQueueId`);
  }
  return { errors, warnings };
}

/** The pools of the graph's tasks, each with the labels of its tasks. */
export function poolsOf(tasks: Record<string, TaskGraphNode>): Map<string, string[]> {
  const pools = new Map<string, string[]>();
  for (const [label, node] of Object.entries(tasks)) {
    const pool = node?.task && typeof node.task === 'object' ? poolOf(node.task) : undefined;
    if (pool) pools.set(pool, [...(pools.get(pool) ?? []), label]);
  }
  return pools;
}

interface Worker {
  workerGroup: string;
}

async function workersOf(client: TgsClient, pool: string): Promise<Worker[]> {
  const [provisionerId, workerType] = pool.split('/');
  const answer = await client.api.request<{ workers: Worker[] }>(
    'queue',
    'GET',
    `/provisioners/${encodeURIComponent(provisionerId)}/worker-types/${encodeURIComponent(workerType)}/workers?limit=100`,
  );
  return answer.workers;
}

/** The pools active lately (a task created or a worker claiming) that have workers, up to the first 50 pools. */
async function poolsWithWorkers(client: TgsClient): Promise<string[]> {
  const { taskQueues } = await client.api.request<{ taskQueues: { taskQueueId: string }[] }>('queue', 'GET', '/task-queues?limit=50');
  const withWorkers = await Promise.all(taskQueues.map(async (q) => ((await workersOf(client, q.taskQueueId).catch(() => [])).length ? q.taskQueueId : undefined)));
  return withWorkers.filter((q): q is string => q !== undefined);
}

/**
 * What the queue knows of the graph's pools: a warning for each pool no worker claimed from in the last day (the
 * queue keeps a worker that long), naming the pools that have workers; and which pools shell workers serve (their
 * workerGroup, and tgs dev's pool).
 */
export async function checkPools(client: TgsClient, pools: Map<string, string[]>): Promise<{ warnings: string[]; shellPools: Set<string> }> {
  const warnings: string[] = [];
  const shellPools = new Set([DEV_SHELL_POOL]);
  let others: string[] | undefined;
  for (const [pool, labels] of pools) {
    const workers = await workersOf(client, pool);
    if (workers.some((w) => w.workerGroup === SHELL_WORKER_GROUP)) shellPools.add(pool);
    if (workers.length > 0) continue;
    others ??= await poolsWithWorkers(client);
    const close = didYouMean(pool, others);
    warnings.push(
      `no worker has claimed from ${pool} in the last day (${labels.length === 1 ? labels[0] : `${labels.length} tasks`} will wait for one)${close}; ` +
        (others.length ? `pools with workers: ${others.join(', ')}` : 'no pool has workers (start one: tgs shell-worker --provisioner-id P --worker-type W)'),
    );
  }
  return { warnings, shellPools };
}

function withSubsAsTaskIds(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(withSubsAsTaskIds);
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  if (Object.keys(record).length === 1 && typeof record.$subs === 'string') return 'A'.repeat(22);
  return Object.fromEntries(Object.entries(record).map(([k, v]) => [k, withSubsAsTaskIds(v)]));
}

/** `--check`: each task in a pool shell workers serve, against the shell worker's payload schema. */
export function checkShellPayloads(tasks: Record<string, TaskGraphNode>, shellPools: Set<string>): string[] {
  const errors: string[] = [];
  for (const [label, node] of Object.entries(tasks)) {
    const pool = node?.task && typeof node.task === 'object' ? poolOf(node.task) : undefined;
    if (!pool || !shellPools.has(pool)) continue;
    // as the worker will see it: each $subs a taskId (22 characters)
    const parsed = parseShellPayload(withSubsAsTaskIds(node.task.payload));
    if ('error' in parsed) errors.push(`${label} (on ${pool}, a shell worker's pool): ${parsed.error.replace(/\n/g, '\n    ')}`);
  }
  return errors;
}
