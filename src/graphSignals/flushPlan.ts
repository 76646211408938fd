import { runResolution, type LatestRun } from '../queue/latestRuns.js';
import type { HearingNode, JoiningTask } from '../scheduler/graphStore.js';
import type { Resolution } from '../workflows/contract.js';

/** A message of a flush: which task it is about and, for a resolution, what it claims. */
export interface FlushItem {
  taskId: string;
  resolution?: Resolution;
}

/** One signal of a flush: the graph (or, for tasks joining one, the group) it goes to and the messages it carries. */
export interface GraphSignal<M> {
  /** the graph's (or group's) id: its workflow is `task-graph/<key>`; the backoff of failures is kept per key */
  key: string;
  msgs: M[];
}

export interface ResolutionSignal<M> extends GraphSignal<M> {
  origin: string;
  /** what the workflow hears: the stored run, not the message's word */
  resolutions: Resolution[];
}

export interface DefinedSignal<M extends FlushItem> extends GraphSignal<M> {
  taskIds: string[];
}

/** What the bridge does with each resolution message of a flush, given its task's stored latest run. */
export interface Confirmation<M extends FlushItem> {
  /** the row agrees: the message's resolution, rewritten from the row (latest runId, its state and reason) */
  confirmed: { msg: M; resolution: Resolution }[];
  /** the task is unknown to this deployment's database (acked, not forwarded) */
  unknown: M[];
  /** the row has a later run (a rerun came before the message, an ordinary race): acked, not forwarded, not logged */
  overtaken: M[];
  /** the row's run is the message's (or older) and disagrees: not the queue's word (forged): acked, not forwarded */
  disagreed: M[];
}

/** Checks each resolution message against its task's stored latest run. */
export function confirmByStoredState<M extends FlushItem>(resolutions: M[], stored: Pick<LatestRun, 'task_id' | 'run_id' | 'state' | 'reason'>[]): Confirmation<M> {
  const rows = new Map(stored.map((r) => [r.task_id, r]));
  const result: Confirmation<M> = { confirmed: [], unknown: [], overtaken: [], disagreed: [] };
  for (const msg of resolutions) {
    const claimed = msg.resolution;
    const row = rows.get(msg.taskId);
    const resolution = row && claimed && row.run_id === claimed.runId && row.state === claimed.state ? runResolution(row) : undefined;
    if (!row) result.unknown.push(msg);
    else if (!resolution && claimed && row.run_id > claimed.runId) result.overtaken.push(msg);
    else if (!resolution) result.disagreed.push(msg);
    else result.confirmed.push({ msg, resolution });
  }
  return result;
}

/**
 * One signal per graph that hears the confirmed resolutions: every graph with the task as a node (its own graph and
 * graphs depending on it, `hearing` from graphsHearing) gets every confirmed message of that task.
 */
export function resolutionSignals<M extends FlushItem>(confirmed: { msg: M; resolution: Resolution }[], hearing: HearingNode[]): ResolutionSignal<M>[] {
  const byTask = new Map<string, { msg: M; resolution: Resolution }[]>();
  for (const c of confirmed) byTask.set(c.msg.taskId, [...(byTask.get(c.msg.taskId) ?? []), c]);
  const byGraph = new Map<string, ResolutionSignal<M>>();
  for (const row of hearing) {
    let signal = byGraph.get(row.task_graph_id);
    if (!signal) byGraph.set(row.task_graph_id, (signal = { key: row.task_graph_id, origin: row.origin, msgs: [], resolutions: [] }));
    for (const c of byTask.get(row.task_id) ?? []) {
      signal.msgs.push(c.msg);
      signal.resolutions.push(c.resolution);
    }
  }
  return [...byGraph.values()];
}

/** One `tasksDefined` signal per group that tasks join (`joining` from tasksJoiningGroups). */
export function definedSignals<M extends FlushItem>(defined: M[], joining: JoiningTask[]): DefinedSignal<M>[] {
  const byGroup = new Map<string, string[]>();
  for (const r of joining) byGroup.set(r.task_group_id, [...(byGroup.get(r.task_group_id) ?? []), r.task_id]);
  return [...byGroup].map(([key, taskIds]) => ({ key, taskIds, msgs: defined.filter((p) => taskIds.includes(p.taskId)) }));
}

/** A resolution recorded for one graph (a row of the relay's graph-signal lane, src/relay/graphSignalStore.ts). */
export interface RecordedResolution {
  task_graph_id: string;
  origin: string;
  resolution: Resolution;
}

/**
 * One signal per graph of recorded resolutions, each carrying its rows in the order given: the lane's rows are
 * already the graphs that hear each resolution, checked against the stored run when they were recorded.
 */
export function recordedSignals<M extends RecordedResolution>(rows: M[]): ResolutionSignal<M>[] {
  const byGraph = new Map<string, ResolutionSignal<M>>();
  for (const row of rows) {
    let signal = byGraph.get(row.task_graph_id);
    if (!signal) byGraph.set(row.task_graph_id, (signal = { key: row.task_graph_id, origin: row.origin, msgs: [], resolutions: [] }));
    signal.msgs.push(row);
    signal.resolutions.push(row.resolution);
  }
  return [...byGraph.values()];
}
