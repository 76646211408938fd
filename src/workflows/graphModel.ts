/**
 * The graph's mutable state as typed arrays, and the graph operations on it (docs/formats.md § Graph operations). Pure and deterministic:
 * the workflow drives it, unit tests drive it directly.
 */
import { base64ToBytes, base64ToInt16, packNodes, unpackNodes, type NodeArrays } from './codec.js';
import type { CarriedState, GraphState as GraphStateName, NodePage } from './contract.js';
import { isResolved as isResolvedState, taskStateOfChar, type ResolvedState } from '../taskStates.js';

export const NODE = {
  /** requires not met yet (externals: not resolved yet) */
  waiting: 0,
  /** requires met, waiting to be dispatched to the queue */
  ready: 1,
  /** the queue has a live run (pending or running) */
  scheduled: 2,
  completed: 3,
  /** failed with no reruns left: blocks the graph */
  failed: 4,
  /** exception after the queue's own retries: blocks the graph */
  exception: 5,
  /** failed with reruns left (or manually rerun): waiting for the rerun dispatch */
  rerunPending: 6,
  /** in a schedule dispatch activity right now */
  dispatching: 7,
  /** in a rerun dispatch activity right now */
  rerunDispatching: 8,
} as const;
export const NODE_STATE_NAMES = [
  'waiting', 'ready', 'scheduled', 'completed', 'failed', 'exception', 'rerunPending', 'dispatching', 'rerunDispatching',
] as const;

export const SLUGID_LENGTH = 22;
/** Per node state: 1 for the ones named after a resolved queue state (completed, failed, exception). */
const RESOLVED_NODE = Uint8Array.from(NODE_STATE_NAMES, (name) => (isResolvedState(name) ? 1 : 0));
const isResolved = (s: number) => RESOLVED_NODE[s] === 1;

export interface DispatchItem {
  idx: number;
  taskId: string;
  kind: 'schedule' | 'rerun';
  /** rerun only when the task's latest run is still this one (guards at-least-once activities) */
  expectedRunId?: number;
  /** reruns left after this rerun, written in the same transaction (automatic reruns) */
  rerunsLeft?: number;
}

function grow<T extends Uint8Array | Int16Array | Int32Array>(array: T, size: number, fill: number): T {
  if (array.length >= size) return array;
  const next = new (array.constructor as { new (n: number): T })(Math.max(size, array.length * 2));
  next.set(array);
  next.fill(fill, array.length);
  return next;
}

export class GraphModel {
  size = 0;
  taskIds: string[] = [];
  readonly index = new Map<string, number>();
  member = new Uint8Array(0);
  mode = new Uint8Array(0);
  state = new Uint8Array(0);
  rerunsLeft = new Int16Array(0);
  lastRun = new Int16Array(0);
  reset = new Uint8Array(0);
  requiresLeft = new Int32Array(0);
  /** requires in CSR form: reqs[reqStart[i] .. reqStart[i+1]) */
  reqStart = new Int32Array(1);
  reqs = new Int32Array(0);
  private edgeCount = 0;
  /** dependents in CSR form, rebuilt when nodes are added */
  private depStart = new Int32Array(1);
  private deps = new Int32Array(0);
  readonly manualReruns = new Set<number>();
  /** members per state, for status and for finished/blocked */
  readonly counts = new Int32Array(NODE_STATE_NAMES.length);
  /** the same for the nodes that are not members (tasks of other groups this graph requires) */
  private readonly externalCounts = new Int32Array(NODE_STATE_NAMES.length);
  memberCount = 0;
  private readyQueue: number[] = [];
  private readyHead = 0;
  private rerunQueue: number[] = [];
  private rerunHead = 0;
  canceled = false;

  /** Appends nodes from a page; states from the carried arrays, else from the queue states, else waiting. */
  addPage(page: NodePage, carried?: { states: Uint8Array; rerunsLeft: Int16Array; lastRun: Int16Array; reset: Uint8Array }): void {
    const n = page.taskIds.length / SLUGID_LENGTH;
    if (page.fromIdx !== this.size) throw new Error(`node page starts at ${page.fromIdx}, expected ${this.size}`);
    const newSize = this.size + n;
    const newEdges = page.requires.length;
    this.member = grow(this.member, newSize, 0);
    this.mode = grow(this.mode, newSize, 0);
    this.state = grow(this.state, newSize, NODE.waiting);
    this.rerunsLeft = grow(this.rerunsLeft, newSize, 0);
    this.lastRun = grow(this.lastRun, newSize, -1);
    this.reset = grow(this.reset, newSize, 0);
    this.requiresLeft = grow(this.requiresLeft, newSize, 0);
    this.reqStart = grow(this.reqStart, newSize + 1, 0);
    this.reqs = grow(this.reqs, this.edgeCount + newEdges, 0);
    let edge = 0;
    for (let k = 0; k < n; k++) {
      const i = this.size + k;
      const taskId = page.taskIds.slice(k * SLUGID_LENGTH, (k + 1) * SLUGID_LENGTH);
      this.taskIds.push(taskId);
      this.index.set(taskId, i);
      this.member[i] = page.members[k] === '1' ? 1 : 0;
      this.mode[i] = page.modes[k] === '1' ? 1 : 0;
      this.rerunsLeft[i] = page.rerunsLeft[k];
      for (let r = 0; r < page.requireCounts[k]; r++) this.reqs[this.edgeCount++] = page.requires[edge++];
      this.reqStart[i + 1] = this.edgeCount;
      let state: number = NODE.waiting;
      if (carried && i < carried.states.length) {
        state = carried.states[i];
        this.rerunsLeft[i] = carried.rerunsLeft[i];
        this.lastRun[i] = carried.lastRun[i];
        this.reset[i] = carried.reset[i];
        // a dispatch in flight at continue-as-new cannot exist (we drain first), but be safe
        if (state === NODE.dispatching) state = NODE.ready;
        if (state === NODE.rerunDispatching) state = NODE.rerunPending;
      } else if (page.queueStates) {
        const latest = page.latestRuns?.[k] ?? -1;
        switch (taskStateOfChar(page.queueStates[k])) {
          case 'pending':
          case 'running':
            state = NODE.scheduled;
            this.lastRun[i] = latest - 1;
            break;
          case 'completed':
            state = NODE.completed;
            this.lastRun[i] = latest;
            break;
          case 'failed':
            state = this.member[i] && this.rerunsLeft[i] > 0 ? NODE.rerunPending : NODE.failed;
            this.lastRun[i] = latest;
            break;
          case 'exception':
            state = NODE.exception;
            this.lastRun[i] = latest;
            break;
          default:
            state = NODE.waiting;
        }
      }
      this.state[i] = state;
      if (this.member[i]) {
        this.memberCount++;
        this.counts[state]++;
      } else {
        this.externalCounts[state]++;
      }
    }
    const oldSize = this.size;
    this.size = newSize;
    this.rebuildDependents();
    // requires-left of the new nodes, from the current state of what they require
    for (let i = oldSize; i < newSize; i++) {
      let left = 0;
      for (let e = this.reqStart[i]; e < this.reqStart[i + 1]; e++) if (!this.satisfies(this.reqs[e], this.mode[i])) left++;
      this.requiresLeft[i] = left;
      const s = this.state[i];
      if (!this.member[i]) continue;
      if (s === NODE.waiting && left === 0) this.setState(i, NODE.ready);
      else if (s === NODE.ready) this.readyQueue.push(i);
      else if (s === NODE.rerunPending) this.rerunQueue.push(i);
    }
    // A node of an earlier page may require one of this page (the body named the required label before defining
    // it, which gives it the later idx): loaded before it, the earlier node counted it as unmet. Count it now from
    // its loaded state, or the earlier node waits forever for a task that completed before a continue-as-new.
    for (let j = oldSize; j < newSize; j++) {
      for (let e = this.depStart[j]; e < this.depStart[j + 1]; e++) {
        const d = this.deps[e];
        if (d >= oldSize || !this.satisfies(j, this.mode[d])) continue;
        this.requiresLeft[d]--;
        if (this.member[d] && this.requiresLeft[d] === 0 && this.state[d] === NODE.waiting) this.setState(d, NODE.ready);
      }
    }
  }

  private rebuildDependents(): void {
    const counts = new Int32Array(this.size + 1);
    for (let e = 0; e < this.edgeCount; e++) counts[this.reqs[e] + 1]++;
    for (let i = 0; i < this.size; i++) counts[i + 1] += counts[i];
    const deps = new Int32Array(this.edgeCount);
    const fill = counts.slice(0, this.size);
    for (let i = 0; i < this.size; i++) {
      for (let e = this.reqStart[i]; e < this.reqStart[i + 1]; e++) deps[fill[this.reqs[e]]++] = i;
    }
    this.depStart = counts;
    this.deps = deps;
  }

  dependentsOf(i: number): number[] {
    const out: number[] = [];
    for (let e = this.depStart[i]; e < this.depStart[i + 1]; e++) out.push(this.deps[e]);
    return out;
  }

  /** Calls `fn` with each dependent of node i, without building an array (explain walks every edge). */
  forEachDependent(i: number, fn: (d: number) => void): void {
    for (let e = this.depStart[i]; e < this.depStart[i + 1]; e++) fn(this.deps[e]);
  }

  requiresOf(i: number): number[] {
    const out: number[] = [];
    for (let e = this.reqStart[i]; e < this.reqStart[i + 1]; e++) out.push(this.reqs[e]);
    return out;
  }

  /** Whether node i counts as met for a dependent with this requires mode. */
  satisfies(i: number, mode: number): boolean {
    const s = this.state[i];
    return mode === 1 ? isResolved(s) : s === NODE.completed;
  }

  /** The one place states change: keeps counts, dependents' requires-left and the queues right. */
  setState(i: number, next: number): void {
    const prev = this.state[i];
    if (prev === next) return;
    this.state[i] = next;
    const counts = this.member[i] ? this.counts : this.externalCounts;
    counts[prev]--;
    counts[next]++;
    if (next === NODE.ready) this.readyQueue.push(i);
    if (next === NODE.rerunPending) this.rerunQueue.push(i);
    const completedChanged = (prev === NODE.completed) !== (next === NODE.completed);
    const resolvedChanged = isResolved(prev) !== isResolved(next);
    if (!completedChanged && !resolvedChanged) return;
    for (let e = this.depStart[i]; e < this.depStart[i + 1]; e++) {
      const d = this.deps[e];
      const changed = this.mode[d] === 1 ? resolvedChanged : completedChanged;
      if (!changed) continue;
      const nowMet = this.mode[d] === 1 ? isResolved(next) : next === NODE.completed;
      this.requiresLeft[d] += nowMet ? -1 : 1;
      if (!this.member[d]) continue;
      if (this.requiresLeft[d] === 0 && this.state[d] === NODE.waiting) this.setState(d, NODE.ready);
      else if (this.requiresLeft[d] > 0 && this.state[d] === NODE.ready) this.setState(d, NODE.waiting);
    }
  }

  /** Operations G3, G4 and G5 (docs/formats.md) for one resolution. Returns false when it was a duplicate or stale. */
  applyResolution(taskId: string, runId: number, resolved: ResolvedState): boolean {
    const i = this.index.get(taskId);
    if (i === undefined || runId <= this.lastRun[i]) return false;
    this.lastRun[i] = runId;
    if (!this.member[i]) {
      this.setState(i, resolved === 'completed' ? NODE.completed : resolved === 'failed' ? NODE.failed : NODE.exception);
      return true;
    }
    this.manualReruns.delete(i);
    if (resolved === 'completed') this.setState(i, NODE.completed);
    else if (resolved === 'failed') this.setState(i, this.rerunsLeft[i] > 0 && !this.canceled ? NODE.rerunPending : NODE.failed);
    else this.setState(i, NODE.exception);
    return true;
  }

  /**
   * An amend replaced or removed node i (src/workflows/amend.ts): it stops being a member, as an external is, so the
   * graph's state no longer counts it; an unresolved one (the amend canceled its task) counts as exception, so it is
   * never dispatched. False when it was not a member (a repeated amend).
   */
  supersede(i: number): boolean {
    if (i < 0 || i >= this.size || !this.member[i]) return false;
    this.counts[this.state[i]]--;
    this.memberCount--;
    this.member[i] = 0;
    this.manualReruns.delete(i);
    this.reset[i] = 0;
    if (!isResolved(this.state[i])) this.setState(i, NODE.exception);
    return true;
  }

  /** Why a manual rerun of node i is refused, or undefined when it is allowed. */
  rerunRefusal(i: number | undefined, name: string): string | undefined {
    if (this.canceled) return 'the task-graph is canceled';
    if (i === undefined) return `${name} is not a task of this task-graph`;
    if (!this.member[i]) return `${name} belongs to another task group`;
    const s = this.state[i];
    if (!isResolved(s)) return `task ${this.taskIds[i]} is ${NODE_STATE_NAMES[s]}; only a resolved task can be rerun`;
    return undefined;
  }

  /** A manual rerun: node i runs again; with resetDependents, resolved dependents (transitively) run after it. */
  manualRerun(i: number, resetDependents: boolean): number[] {
    const resetNodes: number[] = [];
    this.manualReruns.add(i);
    this.setState(i, NODE.rerunPending);
    if (resetDependents) {
      const queue = this.dependentsOf(i);
      const seen = new Set<number>(queue);
      while (queue.length > 0) {
        const d = queue.shift() as number;
        if (!this.member[d] || !isResolved(this.state[d])) continue;
        this.reset[d] = 1;
        this.setState(d, this.requiresLeft[d] === 0 ? NODE.ready : NODE.waiting);
        resetNodes.push(d);
        for (const next of this.dependentsOf(d)) {
          if (!seen.has(next)) {
            seen.add(next);
            queue.push(next);
          }
        }
      }
    }
    return resetNodes;
  }

  /** Takes up to max nodes to dispatch (reruns first) and marks them in flight. */
  takeDispatch(max: number): DispatchItem[] {
    const items: DispatchItem[] = [];
    while (items.length < max && this.rerunHead < this.rerunQueue.length) {
      const i = this.rerunQueue[this.rerunHead++];
      if (this.state[i] !== NODE.rerunPending) continue;
      const manual = this.manualReruns.has(i);
      if (!manual) this.rerunsLeft[i]--;
      items.push({
        idx: i,
        taskId: this.taskIds[i],
        kind: 'rerun',
        expectedRunId: this.lastRun[i],
        ...(manual ? {} : { rerunsLeft: this.rerunsLeft[i] }),
      });
      this.setState(i, NODE.rerunDispatching);
    }
    while (items.length < max && this.readyHead < this.readyQueue.length) {
      const i = this.readyQueue[this.readyHead++];
      if (this.state[i] !== NODE.ready) continue;
      items.push(
        this.reset[i]
          ? { idx: i, taskId: this.taskIds[i], kind: 'rerun', expectedRunId: this.lastRun[i] }
          : { idx: i, taskId: this.taskIds[i], kind: 'schedule' },
      );
      this.setState(i, NODE.dispatching);
    }
    // drop consumed prefixes now and then so the arrays do not grow without bound
    if (this.readyHead > 4096 && this.readyHead * 2 > this.readyQueue.length) {
      this.readyQueue = this.readyQueue.slice(this.readyHead);
      this.readyHead = 0;
    }
    if (this.rerunHead > 4096 && this.rerunHead * 2 > this.rerunQueue.length) {
      this.rerunQueue = this.rerunQueue.slice(this.rerunHead);
      this.rerunHead = 0;
    }
    return items;
  }

  hasDispatchable(): boolean {
    return this.readyHead < this.readyQueue.length || this.rerunHead < this.rerunQueue.length;
  }

  /** After a dispatch activity succeeded: its nodes are live in the queue unless they resolved meanwhile. */
  dispatched(items: DispatchItem[]): void {
    for (const item of items) {
      const s = this.state[item.idx];
      if (s === NODE.dispatching || s === NODE.rerunDispatching) {
        this.reset[item.idx] = 0;
        this.manualReruns.delete(item.idx);
        this.setState(item.idx, NODE.scheduled);
      }
    }
  }

  /**
   * The queue refused to rerun node i (deadline passed, 50 runs): it keeps the resolution the queue still
   * has, so a failed task blocks the graph instead of waiting for a run that will never come.
   */
  rerunRefused(taskId: string, queueState: ResolvedState): boolean {
    const i = this.index.get(taskId);
    if (i === undefined || !this.member[i]) return false;
    const s = this.state[i];
    if (s !== NODE.scheduled && s !== NODE.rerunDispatching && s !== NODE.dispatching) return false;
    this.reset[i] = 0;
    this.manualReruns.delete(i);
    this.setState(i, queueState === 'completed' ? NODE.completed : queueState === 'failed' ? NODE.failed : NODE.exception);
    return true;
  }

  /** After a dispatch activity failed for good: put its nodes back to be tried again. */
  dispatchFailed(items: DispatchItem[]): void {
    for (const item of items) {
      const s = this.state[item.idx];
      if (s === NODE.dispatching) this.setState(item.idx, NODE.ready);
      if (s === NODE.rerunDispatching) {
        if (item.rerunsLeft !== undefined) this.rerunsLeft[item.idx]++;
        this.setState(item.idx, NODE.rerunPending);
      }
    }
  }

  /** How many members have a queue run we believe is live (liveMembers without the scan). */
  liveMemberCount(): number {
    return this.counts[NODE.scheduled];
  }

  /** Members whose queue run we believe is live: the ones reconciliation asks the queue about. */
  liveMembers(): number[] {
    const out: number[] = [];
    for (let i = 0; i < this.size; i++) if (this.member[i] && this.state[i] === NODE.scheduled) out.push(i);
    return out;
  }

  /** How many required tasks of other groups are not resolved yet (unresolvedExternals without the scan). */
  unresolvedExternalCount(): number {
    let n = 0;
    this.externalCounts.forEach((c, s) => {
      if (!isResolved(s)) n += c;
    });
    return n;
  }

  unresolvedExternals(): number[] {
    const out: number[] = [];
    for (let i = 0; i < this.size; i++) if (!this.member[i] && !isResolved(this.state[i])) out.push(i);
    return out;
  }

  blockedBy(): string[] {
    const out: string[] = [];
    if (this.counts[NODE.failed] + this.counts[NODE.exception] === 0) return out;
    for (let i = 0; i < this.size; i++) {
      if (this.member[i] && (this.state[i] === NODE.failed || this.state[i] === NODE.exception)) out.push(this.taskIds[i]);
    }
    return out;
  }

  /** Every member not resolved and not yet canceled, for cancellation. */
  unresolvedMembers(): number[] {
    const out: number[] = [];
    for (let i = 0; i < this.size; i++) if (this.member[i] && !isResolved(this.state[i])) out.push(i);
    return out;
  }

  graphState(): GraphStateName {
    if (this.canceled) return 'canceled';
    if (this.counts[NODE.failed] + this.counts[NODE.exception] > 0) return 'blocked';
    if (this.counts[NODE.completed] === this.memberCount) return 'finished';
    return 'running';
  }

  /** Counts by state name, members only, zeros omitted. */
  countsByName(): Record<string, number> {
    const out: Record<string, number> = {};
    this.counts.forEach((c, s) => {
      if (c > 0) out[NODE_STATE_NAMES[s]] = c;
    });
    return out;
  }

  carry(): Pick<CarriedState, 'nodeCount' | 'nodes' | 'nodeExceptions' | 'manualReruns' | 'canceled'> {
    const { nodes, exceptions } = packNodes({ states: this.state, reset: this.reset, rerunsLeft: this.rerunsLeft, lastRun: this.lastRun }, this.size);
    return { nodeCount: this.size, nodes, nodeExceptions: exceptions, manualReruns: [...this.manualReruns], canceled: this.canceled };
  }

  /** The carried node arrays, from either version of CarriedState. */
  static decodeCarried(carried: CarriedState): NodeArrays {
    if (carried.nodes !== undefined) return unpackNodes(carried.nodes, carried.nodeExceptions ?? [], carried.nodeCount);
    return {
      states: base64ToBytes(carried.states ?? ''),
      rerunsLeft: base64ToInt16(carried.rerunsLeft ?? ''),
      lastRun: base64ToInt16(carried.lastRun ?? ''),
      reset: base64ToBytes(carried.reset ?? ''),
    };
  }
}
