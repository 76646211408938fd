// One open graph: its nodes (from the layout worker), live states (from the changes long-poll), markers (blocking
// tasks and the tasks they hold back), and the renderer. Preact components read it and re-render on `onChange`,
// which fires at most every 200 ms however fast states change; the drawing updates on the next frame.
import { apiGet, apiUrl, ApiError } from '../api';
import { isResolved, stateCode, STATE_NAMES } from '../states';
import { graphHeaderOf, type GraphData, type GraphHeader, type WorkerRequest, type WorkerResponse } from './data';
import { GraphRenderer } from './renderer';
import { AMEND_BITS, AMEND_SHIFT, FLAG_BLOCKING, FLAG_CACHED, FLAG_DIM, FLAG_HELD_BACK, FLAG_SELECTED } from './flags';
import { AMEND_MARKS, amendCode, SUPERSEDED } from './amendMarks';

const DEPENDENT = amendCode('d');
/**
 * A reload the page did not ask for (a dependent resolved, which early cutoff may have kept) waits at least this long
 * after the previous one, and 5 times as long as that one took: the whole graph is fetched and laid out again, tens of
 * milliseconds for a small graph, 2-3 s at 100,000 tasks (docs/ui.md § Measured), so a big graph's page spends at most
 * a sixth of its time loading it again.
 */
const RELOAD_SPACING_MS = 1_000;

interface ChangesAnswer extends GraphHeader {
  graphChanged: boolean;
  changes: { taskIds: string; states: string; runs: number[]; started: (number | null)[]; resolved: (number | null)[]; cached?: string };
}

export interface Metrics {
  /** performance.now() values, from navigation start. */
  start: number;
  dataMs?: number;
  parseMs?: number;
  layoutMs?: number;
  /** When the first frame with the whole graph was drawn (counts are in the page by then). */
  firstDraw?: number;
  nodes?: number;
  edges?: number;
  /** Changes applied, and the frames that drew them. */
  changesApplied: number;
}

export class GraphStore {
  data: GraphData | undefined;
  header: GraphHeader | undefined;
  error: string | undefined;
  liveError: string | undefined;
  /** Counts by state code, members only. */
  counts = new Array<number>(STATE_NAMES.length).fill(0);
  flags = new Uint8Array(0);
  blocking: number[] = [];
  heldBack = 0;
  selected: number | undefined;
  stateFilter: number | undefined;
  /** Only nodes with this amend mark (amendMarks.ts code) are shown at full strength. */
  amendFilter: number | undefined;
  /** How many nodes carry each amend mark (members, and replaced nodes for SUPERSEDED). */
  amendCounts = new Array<number>(AMEND_MARKS.length).fill(0);
  metrics: Metrics = { start: performance.now(), changesApplied: 0 };
  /** Date.now() when the frame that drew the latest change of a task was drawn (for the bench). */
  readonly drawnAt = new Map<string, number>();
  private pendingDraw: string[] = [];
  private idxOf = new Map<string, number>();
  private worker: Worker;
  private renderer: GraphRenderer | undefined;
  private listeners = new Set<() => void>();
  private notifyTimer: ReturnType<typeof setTimeout> | undefined;
  private abort = new AbortController();
  private stopped = false;
  private extendResolve: (() => void) | undefined;
  /** The whole graph is fetched again before the next changes: an amend changed nodes already shown. */
  private reloadWanted: 'now' | 'soon' | undefined;
  private lastReload = { at: 0, ms: 0 };
  /** The amend the nodes drawn reflect (the last whole load's `amends`): a larger one in the feed means a reload. */
  private amendsDrawn = 0;
  /** Aborts the long-poll in flight, so a reload the page asked for does not wait for its answer. */
  private pollAbort: AbortController | undefined;

  constructor(readonly taskGraphId: string) {
    this.worker = new Worker(new URL('./layoutWorker.ts', import.meta.url), { type: 'module' });
    this.worker.onmessage = (event: MessageEvent<WorkerResponse>) => this.onWorker(event.data);
    this.worker.onerror = (event) => this.fail(`the layout worker failed: ${event.message}`);
    // Fetched here, not in the worker: the request is on its way while the worker's script still loads
    // (370 ms of a 2.5 s first frame at 100,000 tasks, docs/bench-journal/2026-11-24.md).
    void this.fetchNodes('load', 0);
  }

  /** Draw into these canvases (the renderer lives as long as the page shows the graph). */
  attach(canvas: HTMLCanvasElement, overlay: HTMLCanvasElement): void {
    try {
      this.renderer = new GraphRenderer(canvas, overlay);
    } catch (err) {
      this.fail((err as Error).message);
      return;
    }
    this.renderer.onPick = (idx) => this.select(idx, false);
    this.renderer.onDraw = () => this.afterDraw();
    if (this.data) this.renderer.setGraph(this.rendererGraph(), true);
  }

  subscribe(fn: () => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  stop(): void {
    this.stopped = true;
    this.abort.abort();
    this.worker.terminate();
    this.renderer?.destroy();
    clearTimeout(this.notifyTimer);
  }

  get n(): number {
    return this.data?.n ?? 0;
  }

  taskId(idx: number): string {
    return (this.data as GraphData).taskIds.slice(22 * idx, 22 * idx + 22);
  }

  label(idx: number): string {
    const d = this.data as GraphData;
    return d.labels[idx] || this.taskId(idx);
  }

  indexOf(taskId: string): number | undefined {
    return this.idxOf.get(taskId);
  }

  /** A node by exact taskId or label, else the first label containing the text (case-insensitive); members first. */
  find(text: string): number | undefined {
    const d = this.data;
    const q = text.trim();
    if (!d || !q) return undefined;
    const byId = this.idxOf.get(q);
    if (byId !== undefined) return byId;
    // a superseded node keeps its label: the member holding the label now comes first
    const first = (match: (label: string) => boolean) => {
      let other = -1;
      for (let i = 0; i < d.n; i++) {
        if (!match(d.labels[i])) continue;
        if (d.members[i]) return i;
        if (other < 0) other = i;
      }
      return other >= 0 ? other : undefined;
    };
    const lower = q.toLowerCase();
    return first((l) => l === q) ?? first((l) => l.toLowerCase().includes(lower));
  }

  /** Up to `limit` nodes whose label or taskId contains the text. */
  suggest(text: string, limit = 8): number[] {
    const d = this.data;
    const q = text.trim().toLowerCase();
    if (!d || q.length < 1) return [];
    const out: number[] = [];
    for (let i = 0; i < d.n && out.length < limit; i++) if (d.labels[i].toLowerCase().includes(q)) out.push(i);
    const byId = this.idxOf.get(text.trim());
    if (byId !== undefined && !out.includes(byId)) out.unshift(byId);
    return out.slice(0, limit);
  }

  select(idx: number | undefined, center: boolean): void {
    const d = this.data;
    if (!d) return;
    if (this.selected !== undefined) this.flags[this.selected] &= ~FLAG_SELECTED;
    this.selected = idx;
    if (idx !== undefined) {
      this.flags[idx] |= FLAG_SELECTED;
      // Emphasise its requires and dependents.
      const segs: number[] = [];
      const push = (a: number, b: number) => segs.push(d.xy[2 * a], d.xy[2 * a + 1], d.xy[2 * b], d.xy[2 * b + 1]);
      for (let e = d.reqStart[idx]; e < d.reqStart[idx + 1]; e++) push(d.req[e], idx);
      for (let e = d.depStart[idx]; e < d.depStart[idx + 1]; e++) push(idx, d.dep[e]);
      this.renderer?.setHighlight(new Float32Array(segs));
      if (center) this.renderer?.centerOn(idx);
    } else {
      this.renderer?.setHighlight(new Float32Array(0));
    }
    this.renderer?.flagsChanged();
    this.notify(true);
  }

  setStateFilter(code: number | undefined): void {
    this.stateFilter = code;
    this.updateDim();
    this.renderer?.flagsChanged();
    this.notify(true);
  }

  setAmendFilter(code: number | undefined): void {
    this.amendFilter = code;
    this.updateDim();
    this.renderer?.flagsChanged();
    this.notify(true);
  }

  /** The amend mark of a node (amendMarks.ts code). */
  amendMark(idx: number): number {
    return (this.data as GraphData).amend[idx];
  }

  /**
   * Fetches the whole graph again (after an amend this page made): members, marks and states, laid out anew, in the
   * live feed's turn, so no state goes back.
   */
  reload(): void {
    this.reloadWanted = 'now';
    this.pollAbort?.abort();
  }

  fit(): void {
    this.renderer?.fit();
  }

  zoomBy(factor: number): void {
    this.renderer?.zoomBy(factor);
  }

  screenPosition(idx: number): { x: number; y: number } | undefined {
    return this.renderer?.screenPosition(idx);
  }

  requires(idx: number): number[] {
    const d = this.data as GraphData;
    return Array.from(d.req.subarray(d.reqStart[idx], d.reqStart[idx + 1]));
  }

  dependents(idx: number): number[] {
    const d = this.data as GraphData;
    return Array.from(d.dep.subarray(d.depStart[idx], d.depStart[idx + 1]));
  }

  /** ms the latest run took (so far, for a running task); NaN when it has not started. */
  duration(idx: number, now = Date.now()): number {
    const d = this.data as GraphData;
    const started = d.started[idx];
    if (Number.isNaN(started)) return NaN;
    const resolved = d.resolved[idx];
    return (Number.isNaN(resolved) ? (d.states[idx] === 2 ? now : NaN) : resolved) - started;
  }

  private nodesUrl(fromIdx: number): string {
    return apiUrl('scheduler', `/task-graph/${this.taskGraphId}/nodes${fromIdx ? `?fromIdx=${fromIdx}` : ''}`);
  }

  /** The nodes answer from `fromIdx` on, handed to the worker as bytes (transferred, not copied). */
  private async fetchNodes(type: WorkerRequest['type'], fromIdx: number): Promise<void> {
    const t0 = performance.now();
    try {
      const res = await fetch(this.nodesUrl(fromIdx), { headers: { accept: 'application/json' }, signal: this.abort.signal });
      const body = await res.arrayBuffer();
      const request: WorkerRequest = { type, status: res.status, body, fetchMs: performance.now() - t0 };
      this.worker.postMessage(request, [body]);
    } catch (err) {
      if (this.stopped) return;
      this.onWorker({ type: 'error', status: 0, message: (err as Error).message });
    }
  }

  private fail(message: string): void {
    this.error = message;
    this.notify(true);
  }

  private onWorker(message: WorkerResponse): void {
    if (message.type === 'error') {
      this.fail(message.status === 404 ? `No task-graph ${this.taskGraphId} here: ${message.message}` : `Cannot load the graph: ${message.message}`);
      this.extendResolve?.();
      return;
    }
    const data = message.data;
    const old = this.data;
    if (old && data.newFrom > 0) {
      // An extension: our states of the old nodes are newer than the worker's.
      data.states.set(old.states.subarray(0, data.newFrom));
      data.runs.set(old.runs.subarray(0, data.newFrom));
      data.started.set(old.started.subarray(0, data.newFrom));
      data.resolved.set(old.resolved.subarray(0, data.newFrom));
      data.cached.set(old.cached.subarray(0, data.newFrom));
    } else {
      this.header = data.header;
      this.amendsDrawn = data.header.amends;
      this.metrics.dataMs = data.timings.fetchMs;
      this.metrics.parseMs = data.timings.parseMs;
      this.metrics.layoutMs = data.timings.layoutMs;
      this.metrics.nodes = data.n;
      this.metrics.edges = data.req.length;
    }
    this.data = data;
    for (let i = old ? old.n : 0; i < data.n; i++) this.idxOf.set(data.taskIds.slice(22 * i, 22 * i + 22), i);
    const flags = new Uint8Array(data.n);
    flags.set(this.flags.subarray(0, Math.min(this.flags.length, data.n)));
    for (let i = 0; i < data.n; i++) {
      const f = data.cached[i] ? flags[i] | FLAG_CACHED : flags[i] & ~FLAG_CACHED;
      flags[i] = (f & ~AMEND_BITS) | (data.amend[i] << AMEND_SHIFT);
    }
    this.flags = flags;
    this.recount();
    this.updateMarkers();
    this.updateDim();
    this.renderer?.setGraph(this.rendererGraph(), !old);
    // laid out again: the selected node's edges are drawn where its neighbours are now
    if (old && this.selected !== undefined) this.select(this.selected < data.n ? this.selected : undefined, false);
    this.notify(true);
    if (this.extendResolve) this.extendResolve();
    else if (!old) void this.follow();
  }

  private rendererGraph() {
    const d = this.data as GraphData;
    return { n: d.n, xy: d.xy, edges: d.edges, states: d.states, flags: this.flags, labels: d.labels, bounds: d.bounds, xScale: d.xScale };
  }

  private recount(): void {
    const d = this.data as GraphData;
    this.counts.fill(0);
    this.amendCounts.fill(0);
    for (let i = 0; i < d.n; i++) {
      if (d.members[i]) this.counts[d.states[i]]++;
      if (d.members[i] || d.amend[i] === SUPERSEDED) this.amendCounts[d.amend[i]]++;
    }
  }

  /** Blocking tasks (the graph's blockedBy) and everything downstream of them. */
  private updateMarkers(): void {
    const d = this.data as GraphData;
    const header = this.header as GraphHeader;
    for (let i = 0; i < d.n; i++) this.flags[i] &= ~(FLAG_BLOCKING | FLAG_HELD_BACK);
    this.blocking = header.blockedBy.map((id) => this.idxOf.get(id)).filter((i): i is number => i !== undefined);
    const queue: number[] = [];
    for (const b of this.blocking) {
      this.flags[b] |= FLAG_BLOCKING;
      queue.push(b);
    }
    let held = 0;
    while (queue.length) {
      const v = queue.pop() as number;
      for (let e = d.depStart[v]; e < d.depStart[v + 1]; e++) {
        const w = d.dep[e];
        if (this.flags[w] & (FLAG_HELD_BACK | FLAG_BLOCKING)) continue;
        // A dependent that already resolved is not held back by this failure.
        if (isResolved(d.states[w])) continue;
        this.flags[w] |= FLAG_HELD_BACK;
        held++;
        queue.push(w);
      }
    }
    this.heldBack = held;
  }

  private updateDim(): void {
    const d = this.data;
    if (!d) return;
    const f = this.stateFilter;
    const a = this.amendFilter;
    for (let i = 0; i < d.n; i++) {
      if ((f !== undefined && d.states[i] !== f) || (a !== undefined && d.amend[i] !== a)) this.flags[i] |= FLAG_DIM;
      else this.flags[i] &= ~FLAG_DIM;
    }
  }

  /** The live feed: long-polls the changes endpoint from the nodes answer's cursor, one request at a time. */
  private async follow(): Promise<void> {
    let failures = 0;
    while (!this.stopped) {
      const reloadDue = this.lastReload.at + Math.max(RELOAD_SPACING_MS, 5 * this.lastReload.ms);
      if (this.reloadWanted === 'now' || (this.reloadWanted === 'soon' && performance.now() >= reloadDue)) {
        await this.reloadNodes();
        continue;
      }
      // a reload due soon ends the long-poll's wait (20 s by default) when it is due
      const wait = this.reloadWanted === 'soon' ? `&wait=${Math.min(60, Math.max(1, Math.ceil((reloadDue - performance.now()) / 1000)))}` : '';
      const header = this.header as GraphHeader;
      let answer: ChangesAnswer;
      const poll = new AbortController();
      this.pollAbort = poll;
      const stop = () => poll.abort();
      this.abort.signal.addEventListener('abort', stop);
      try {
        answer = await apiGet<ChangesAnswer>('scheduler', `/task-graph/${this.taskGraphId}/changes?since=${encodeURIComponent(header.cursor)}${wait}`, poll.signal);
        failures = 0;
        if (this.liveError) {
          this.liveError = undefined;
          this.notify(true);
        }
      } catch (err) {
        if (this.stopped) return;
        // aborted for a reload (reload())
        if (poll.signal.aborted) continue;
        failures++;
        this.liveError = `Live updates interrupted (${err instanceof ApiError ? `${err.status} ${err.message}` : (err as Error).message}); retrying…`;
        this.notify(true);
        await new Promise((r) => setTimeout(r, Math.min(5000, 500 * failures)));
        continue;
      } finally {
        this.abort.signal.removeEventListener('abort', stop);
      }
      this.applyChanges(answer);
      // amended since the nodes were drawn, by this page or another client: even an amend that adds no node changes
      // nodes shown (a patch, a rerun, a cutoff), which only the nodes answer says
      if (answer.amends > this.amendsDrawn) {
        this.reloadWanted = 'now';
        continue;
      }
      if (answer.nodeCount > this.n) {
        // Extended: fetch the new nodes and lay out again before reading more changes, so states never go back.
        await new Promise<void>((resolve) => {
          this.extendResolve = resolve;
          void this.fetchNodes('extend', this.n);
        });
        this.extendResolve = undefined;
      }
    }
  }

  /** The whole graph again, laid out anew (see reload()); the feed goes on from the new answer's cursor. */
  private async reloadNodes(): Promise<void> {
    this.reloadWanted = undefined;
    const started = performance.now();
    await new Promise<void>((resolve) => {
      this.extendResolve = resolve;
      void this.fetchNodes('load', 0);
    });
    this.extendResolve = undefined;
    this.lastReload = { at: performance.now(), ms: performance.now() - started };
  }

  private applyChanges(answer: ChangesAnswer): void {
    const d = this.data as GraphData;
    const c = answer.changes;
    const count = c.states.length;
    let statesChanged = false;
    let flagsChanged = false;
    for (let k = 0; k < count; k++) {
      const taskId = c.taskIds.slice(22 * k, 22 * k + 22);
      const i = this.idxOf.get(taskId);
      if (i === undefined) continue;
      const code = stateCode(c.states[k]);
      // a dependent an amend made resolves: early cutoff may have kept it (mark `k`), which only the nodes answer says
      if (d.amend[i] === DEPENDENT && isResolved(code) && !isResolved(d.states[i])) this.reloadWanted ??= 'soon';
      if (d.members[i] && d.states[i] !== code) {
        this.counts[d.states[i]]--;
        this.counts[code]++;
      }
      d.states[i] = code;
      d.runs[i] = c.runs[k];
      d.started[i] = c.started[k] === null ? NaN : (c.started[k] as number) + answer.timeBase;
      d.resolved[i] = c.resolved[k] === null ? NaN : (c.resolved[k] as number) + answer.timeBase;
      const cached = c.cached?.charCodeAt(k) === 49 ? 1 : 0;
      if (d.cached[i] !== cached) {
        d.cached[i] = cached;
        this.flags[i] = cached ? this.flags[i] | FLAG_CACHED : this.flags[i] & ~FLAG_CACHED;
        flagsChanged = true;
      }
      this.pendingDraw.push(taskId);
      statesChanged = true;
    }
    this.metrics.changesApplied += count;
    const blockedChanged = answer.blockedBy.join() !== (this.header as GraphHeader).blockedBy.join();
    this.header = graphHeaderOf(answer);
    if (blockedChanged || (statesChanged && this.blocking.length)) {
      this.updateMarkers();
      this.renderer?.flagsChanged();
    }
    if (statesChanged && this.stateFilter !== undefined) {
      this.updateDim();
      this.renderer?.flagsChanged();
    }
    if (flagsChanged) this.renderer?.flagsChanged();
    if (statesChanged) this.renderer?.statesChanged();
    this.notify(false);
  }

  private afterDraw(): void {
    if (this.metrics.firstDraw === undefined && this.data) this.metrics.firstDraw = performance.now();
    if (this.pendingDraw.length) {
      const now = Date.now();
      for (const id of this.pendingDraw) this.drawnAt.set(id, now);
      this.pendingDraw = [];
      if (this.drawnAt.size > 200_000) this.drawnAt.clear();
    }
  }

  private notify(now: boolean): void {
    if (now) {
      clearTimeout(this.notifyTimer);
      this.notifyTimer = undefined;
      for (const fn of this.listeners) fn();
      return;
    }
    if (this.notifyTimer) return;
    this.notifyTimer = setTimeout(() => {
      this.notifyTimer = undefined;
      for (const fn of this.listeners) fn();
    }, 200);
  }
}
