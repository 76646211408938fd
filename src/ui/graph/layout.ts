// A layered DAG layout that stays well under a second at 100,000 nodes and 400,000 edges (layout libraries
// made for this, dagre/elkjs/d3-dag, take minutes at that size: see docs/ui.md). Steps, each O(V + E) or
// O(V log V):
//   1. layers: longest path from the sources (every edge points down), then sources pulled down next to their
//      highest dependent, so a task added late that requires nothing does not sit far above its dependents;
//   2. order within each layer: barycenter sweeps down and up (a few rounds, no dummy nodes for long edges);
//   3. coordinates: a layer wider than the row width wraps into several rows, filled column by column, so x
//      still follows the order and the drawing keeps a screen-like aspect ratio.
// No imports: it runs in the layout Web Worker and, for the bench and tests, in Node.

export interface LayoutInput {
  /** Number of nodes. */
  n: number;
  /** requires of node i are req[reqStart[i] .. reqStart[i+1]) (node indexes). */
  reqStart: Uint32Array;
  req: Uint32Array;
}

export interface Layout {
  /** x, y per node (world units: neighbours in a row are 1 apart). */
  xy: Float32Array;
  layer: Int32Array;
  layers: number;
  /** dependents of node i are dep[depStart[i] .. depStart[i+1]). */
  depStart: Uint32Array;
  dep: Uint32Array;
  bounds: { minX: number; maxX: number; minY: number; maxY: number };
  /** Horizontal distance between neighbours in a row (1, or more for a narrow graph). */
  xScale: number;
}

export const ROW_GAP = 1.2;
export const LAYER_GAP = 3;

/** CSR of requires from per-node counts and the flat list. */
export function csrFromCounts(counts: ArrayLike<number>, flat: ArrayLike<number>): { reqStart: Uint32Array; req: Uint32Array } {
  const reqStart = new Uint32Array(counts.length + 1);
  for (let i = 0; i < counts.length; i++) reqStart[i + 1] = reqStart[i] + counts[i];
  return { reqStart, req: Uint32Array.from(flat) };
}

export function dependentsOf(n: number, reqStart: Uint32Array, req: Uint32Array): { depStart: Uint32Array; dep: Uint32Array } {
  const depStart = new Uint32Array(n + 1);
  for (let e = 0; e < req.length; e++) depStart[req[e] + 1]++;
  for (let i = 0; i < n; i++) depStart[i + 1] += depStart[i];
  const fill = depStart.slice(0, n);
  const dep = new Uint32Array(req.length);
  for (let v = 0; v < n; v++) for (let e = reqStart[v]; e < reqStart[v + 1]; e++) dep[fill[req[e]]++] = v;
  return { depStart, dep };
}

export function layoutGraph(input: LayoutInput, options: { rowWidth?: number; sweeps?: number } = {}): Layout {
  const { n, reqStart, req } = input;
  const { depStart, dep } = dependentsOf(n, reqStart, req);

  // 1. Topological order (Kahn) and longest-path layers.
  const indeg = new Uint32Array(n);
  for (let v = 0; v < n; v++) indeg[v] = reqStart[v + 1] - reqStart[v];
  const order = new Uint32Array(n);
  let head = 0;
  let tail = 0;
  for (let v = 0; v < n; v++) if (indeg[v] === 0) order[tail++] = v;
  const layer = new Int32Array(n);
  while (head < tail) {
    const v = order[head++];
    for (let e = depStart[v]; e < depStart[v + 1]; e++) {
      const d = dep[e];
      if (layer[d] < layer[v] + 1) layer[d] = layer[v] + 1;
      if (--indeg[d] === 0) order[tail++] = d;
    }
  }
  // A cycle cannot be submitted; should one appear anyway, its nodes go below everything else.
  if (tail < n) {
    let max = 0;
    for (let i = 0; i < tail; i++) max = Math.max(max, layer[order[i]]);
    for (let v = 0; v < n; v++) if (indeg[v] > 0) { layer[v] = max + 1; order[tail++] = v; }
  }
  for (let i = n - 1; i >= 0; i--) {
    const v = order[i];
    if (reqStart[v + 1] !== reqStart[v] || depStart[v + 1] === depStart[v]) continue;
    let min = Infinity;
    for (let e = depStart[v]; e < depStart[v + 1]; e++) min = Math.min(min, layer[dep[e]]);
    layer[v] = min - 1;
  }
  let layers = 0;
  for (let v = 0; v < n; v++) layers = Math.max(layers, layer[v] + 1);

  // Nodes grouped by layer (counting sort keeps node order as the initial order).
  const layerStart = new Uint32Array(layers + 1);
  for (let v = 0; v < n; v++) layerStart[layer[v] + 1]++;
  for (let l = 0; l < layers; l++) layerStart[l + 1] += layerStart[l];
  const byLayer = new Uint32Array(n);
  const fill = layerStart.slice(0, layers);
  for (let v = 0; v < n; v++) byLayer[fill[layer[v]]++] = v;

  // 2. Barycenter sweeps. pos = normalized position within its layer (0..1).
  const pos = new Float64Array(n);
  const setPositions = (l: number) => {
    const s = layerStart[l];
    const size = layerStart[l + 1] - s;
    for (let k = 0; k < size; k++) pos[byLayer[s + k]] = size === 1 ? 0.5 : k / (size - 1);
  };
  for (let l = 0; l < layers; l++) setPositions(l);
  const key = new Float64Array(n);
  const sortLayer = (l: number, down: boolean) => {
    const s = layerStart[l];
    const e = layerStart[l + 1];
    if (e - s < 2) return;
    for (let k = s; k < e; k++) {
      const v = byLayer[k];
      const [a, b, list] = down ? [reqStart[v], reqStart[v + 1], req] : [depStart[v], depStart[v + 1], dep];
      if (a === b) {
        key[v] = pos[v];
        continue;
      }
      let sum = 0;
      for (let j = a; j < b; j++) sum += pos[list[j]];
      key[v] = sum / (b - a);
    }
    const slice = byLayer.subarray(s, e);
    const sorted = Array.from(slice).sort((x, y) => key[x] - key[y] || pos[x] - pos[y]);
    slice.set(sorted);
    setPositions(l);
  };
  const sweeps = options.sweeps ?? 4;
  for (let round = 0; round < sweeps; round++) {
    if (round % 2 === 0) for (let l = 1; l < layers; l++) sortLayer(l, true);
    else for (let l = layers - 2; l >= 0; l--) sortLayer(l, false);
  }

  // 3. Coordinates: rows of at most rowWidth nodes, a layer's rows filled column by column.
  const rowWidth = Math.max(16, options.rowWidth ?? Math.ceil(Math.sqrt(n * 8)));
  const xy = new Float32Array(2 * n);
  let y = 0;
  const bounds = { minX: Infinity, maxX: -Infinity, minY: 0, maxY: 0 };
  for (let l = 0; l < layers; l++) {
    const s = layerStart[l];
    const size = layerStart[l + 1] - s;
    const rows = Math.max(1, Math.ceil(size / rowWidth));
    const cols = Math.ceil(size / rows);
    for (let k = 0; k < size; k++) {
      const v = byLayer[s + k];
      const col = Math.floor(k / rows);
      const row = k % rows;
      // The last column may be short: centre it on the others.
      const inCol = col === cols - 1 ? size - col * rows : rows;
      const x = col - (cols - 1) / 2;
      const yy = y + (row + (rows - inCol) / 2) * ROW_GAP;
      xy[2 * v] = x;
      xy[2 * v + 1] = yy;
      if (x < bounds.minX) bounds.minX = x;
      if (x > bounds.maxX) bounds.maxX = x;
    }
    y += (rows - 1) * ROW_GAP;
    bounds.maxY = y;
    y += LAYER_GAP;
  }
  if (n === 0) Object.assign(bounds, { minX: 0, maxX: 0 });
  // A narrow graph (a few tasks per layer) is spread sideways, up to 4×, towards twice as wide as tall, so its
  // labels have room; the drawing keeps one zoom for both axes.
  const xScale = Math.min(4, Math.max(1, (2 * (bounds.maxY - bounds.minY)) / Math.max(1, bounds.maxX - bounds.minX)));
  if (xScale > 1) {
    for (let v = 0; v < n; v++) xy[2 * v] *= xScale;
    bounds.minX *= xScale;
    bounds.maxX *= xScale;
  }
  return { xy, layer, layers, depStart, dep, bounds, xScale };
}

/** Line segments (x1, y1, x2, y2 per edge, requirement → dependent) for drawing. */
export function edgeSegments(n: number, reqStart: Uint32Array, req: Uint32Array, xy: Float32Array): Float32Array {
  const out = new Float32Array(req.length * 4);
  let o = 0;
  for (let v = 0; v < n; v++) {
    for (let e = reqStart[v]; e < reqStart[v + 1]; e++) {
      const u = req[e];
      out[o++] = xy[2 * u];
      out[o++] = xy[2 * u + 1];
      out[o++] = xy[2 * v];
      out[o++] = xy[2 * v + 1];
    }
  }
  return out;
}
