// The layout Web Worker: parses the graph's compact nodes answer (the page fetches it and transfers the bytes)
// and lays the graph out off the main thread, then transfers typed arrays to the page. It keeps the raw nodes so
// an extension (nodes added by extend) only brings the new ones and everything is laid out again.
import { csrFromCounts, edgeSegments, layoutGraph } from './layout';
import { stateCode } from '../states';
import { amendCode } from './amendMarks';
import { graphHeaderOf, type GraphData, type GraphHeader, type WorkerRequest, type WorkerResponse } from './data';

interface NodesAnswer extends GraphHeader {
  fromIdx: number;
  taskIds: string;
  labels: string[];
  members: string;
  states: string;
  runs: number[];
  started: (number | null)[];
  resolved: (number | null)[];
  cached: string;
  /** one character a node (amendMarks.ts); absent from an API older than amend's marks */
  amend?: string;
  requireCounts: number[];
  requires: number[];
}

const scope = self as unknown as {
  onmessage: ((event: MessageEvent<WorkerRequest>) => void) | null;
  postMessage(message: WorkerResponse, transfer?: Transferable[]): void;
};

let raw: NodesAnswer | undefined;

/** An answer's `amend`, '-' for each node where the answer has none. */
const marksOf = (answer: NodesAnswer) => answer.amend ?? '-'.repeat(answer.labels.length);

function append(into: NodesAnswer, more: NodesAnswer): NodesAnswer {
  const n = into.labels.length;
  if (more.fromIdx !== n) throw new Error(`expected nodes from ${n}, got ${more.fromIdx}`);
  return {
    ...more,
    fromIdx: 0,
    taskIds: into.taskIds + more.taskIds,
    labels: into.labels.concat(more.labels),
    members: into.members + more.members,
    states: into.states + more.states,
    runs: into.runs.concat(more.runs),
    started: into.started.concat(more.started),
    resolved: into.resolved.concat(more.resolved),
    cached: into.cached + more.cached,
    amend: marksOf(into) + marksOf(more),
    requireCounts: into.requireCounts.concat(more.requireCounts),
    requires: into.requires.concat(more.requires),
  };
}

function handle(request: WorkerRequest): void {
  const t1 = performance.now();
  const text = new TextDecoder().decode(request.body);
  if (request.status !== 200) {
    let message = text.slice(0, 300);
    try {
      message = (JSON.parse(text) as { message?: string }).message ?? message;
    } catch {
      // not JSON: keep the text
    }
    scope.postMessage({ type: 'error', status: request.status, message });
    return;
  }
  const answer = JSON.parse(text) as NodesAnswer;
  const t2 = performance.now();
  const newFrom = request.type === 'extend' && raw ? raw.labels.length : 0;
  raw = request.type === 'extend' && raw ? append(raw, answer) : answer;
  const n = raw.labels.length;
  const { reqStart, req } = csrFromCounts(raw.requireCounts, raw.requires);
  const layout = layoutGraph({ n, reqStart, req });
  const edges = edgeSegments(n, reqStart, req, layout.xy);
  const t3 = performance.now();
  const time = (ms: number | null) => (ms === null ? NaN : ms + raw!.timeBase);
  const states = new Uint8Array(n);
  const members = new Uint8Array(n);
  const cached = new Uint8Array(n);
  const amend = new Uint8Array(n);
  for (let i = 0; i < n; i++) {
    states[i] = stateCode(raw.states[i]);
    members[i] = raw.members.charCodeAt(i) === 49 ? 1 : 0;
    // an older API's answer has no `cached`, nor `amend`
    cached[i] = raw.cached?.charCodeAt(i) === 49 ? 1 : 0;
    amend[i] = amendCode(raw.amend?.[i]);
  }
  const data: GraphData = {
    header: graphHeaderOf(raw),
    n,
    newFrom,
    taskIds: raw.taskIds,
    labels: raw.labels,
    members,
    states,
    runs: Int32Array.from(raw.runs),
    started: Float64Array.from(raw.started, time),
    resolved: Float64Array.from(raw.resolved, time),
    cached,
    amend,
    reqStart,
    req,
    depStart: layout.depStart,
    dep: layout.dep,
    xy: layout.xy,
    edges,
    layers: layout.layers,
    xScale: layout.xScale,
    bounds: layout.bounds,
    timings: { fetchMs: request.fetchMs, parseMs: t2 - t1, layoutMs: t3 - t2 },
  };
  const transfer = [members, states, cached, amend, data.runs, data.started, data.resolved, reqStart, req, data.depStart, data.dep, data.xy, edges].map((a) => a.buffer);
  scope.postMessage({ type: 'graph', data }, transfer);
}

scope.onmessage = (event) => {
  try {
    handle(event.data);
  } catch (err) {
    scope.postMessage({ type: 'error', status: 0, message: (err as Error).message });
  }
};
