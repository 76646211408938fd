// What the layout worker hands the page: the graph's nodes as typed arrays plus their positions.

/** The graph-level fields of the nodes and changes answers (src/scheduler/api/nodes.ts). */
export interface GraphHeader {
  status: { schedulerId: string; taskGraphId: string; state: string; routing: string };
  name: string;
  cursor: string;
  taskCount: number;
  nodeCount: number;
  blockedBy: string[];
  /** who ended the graph and why (canceled, terminated), '' otherwise */
  stateReason: string;
  timeBase: number;
  /** the number of the graph's last amend, 0 before any */
  amends: number;
}

/** The header fields of a nodes or changes answer, without the rest of the answer (one list, kept by both readers). */
export function graphHeaderOf(answer: GraphHeader): GraphHeader {
  const { status, name, cursor, taskCount, nodeCount, blockedBy, stateReason, timeBase, amends } = answer;
  return { status, name, cursor, taskCount, nodeCount, blockedBy, stateReason, timeBase, amends };
}

export interface GraphData {
  header: GraphHeader;
  n: number;
  /** Nodes below this index were already known (an extension re-sends everything). */
  newFrom: number;
  /** 22 characters per node. */
  taskIds: string;
  labels: string[];
  /** 1 = a task of the graph, 0 = an external task it depends on. */
  members: Uint8Array;
  states: Uint8Array;
  runs: Int32Array;
  /** Latest run started / resolved, ms since the epoch; NaN when absent. */
  started: Float64Array;
  resolved: Float64Array;
  /** 1 where the latest run was reused from the cache. */
  cached: Uint8Array;
  /** What an amend did to each node: its code in amendMarks.ts (0 where none did, and from an API without `amend`). */
  amend: Uint8Array;
  reqStart: Uint32Array;
  req: Uint32Array;
  depStart: Uint32Array;
  dep: Uint32Array;
  xy: Float32Array;
  edges: Float32Array;
  layers: number;
  xScale: number;
  bounds: { minX: number; maxX: number; minY: number; maxY: number };
  timings: { fetchMs: number; parseMs: number; layoutMs: number };
}

/**
 * A nodes answer for the worker to parse and lay out: the whole graph (`load`) or the nodes an extension added
 * (`extend`). The page fetches it (while the worker is still starting) and transfers the bytes.
 */
export interface WorkerRequest {
  type: 'load' | 'extend';
  status: number;
  body: ArrayBuffer;
  fetchMs: number;
}
export type WorkerResponse = { type: 'graph'; data: GraphData } | { type: 'error'; status: number; message: string };
