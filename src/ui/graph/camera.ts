// The view of the graph: centre and zoom in world units, conversions between screen and world, fitting, zooming
// about a point, node size and picking. Pure (no DOM, no WebGL), so it is unit-tested in node.

/** World units: neighbours in a row are 1 apart; a node is this wide. */
export const NODE_SIZE = 0.62;
/** A small graph is not blown up beyond this many pixels per world unit. */
export const MAX_FIT_ZOOM = 70;
/** Zooming in stops here (pixels per world unit); zooming out at a quarter of the fit. */
export const MAX_ZOOM = 400;

export interface Bounds {
  minX: number;
  maxX: number;
  minY: number;
  maxY: number;
}

export interface Point {
  x: number;
  y: number;
}

export class Camera {
  center: Point = { x: 0, y: 0 };
  /** CSS pixels per world unit. */
  zoom = 1;
  fitZoom = 1;
  /** Viewport size in CSS pixels. */
  width = 1;
  height = 1;

  toWorld(sx: number, sy: number): Point {
    return { x: (sx - this.width / 2) / this.zoom + this.center.x, y: (sy - this.height / 2) / this.zoom + this.center.y };
  }

  toScreen(wx: number, wy: number): Point {
    return { x: (wx - this.center.x) * this.zoom + this.width / 2, y: (wy - this.center.y) * this.zoom + this.height / 2 };
  }

  /** Node diameter in CSS pixels at the current zoom. */
  pointSize(): number {
    return Math.min(Math.max(NODE_SIZE * this.zoom, 2.5), 48);
  }

  /** The zoom that shows these bounds whole (with a margin), capped for small graphs. */
  computeFitZoom(b: Bounds): void {
    this.fitZoom = Math.min(this.width / (b.maxX - b.minX + 3), this.height / (b.maxY - b.minY + 3), MAX_FIT_ZOOM);
  }

  /** A new viewport size; a view that was fitted stays fitted. */
  resize(width: number, height: number, bounds: Bounds | undefined): void {
    const wasFit = Math.abs(this.zoom - this.fitZoom) < 1e-9;
    this.width = Math.max(1, width);
    this.height = Math.max(1, height);
    if (bounds) this.computeFitZoom(bounds);
    if (wasFit) this.zoom = this.fitZoom;
  }

  fit(b: Bounds): void {
    this.center = { x: (b.minX + b.maxX) / 2, y: (b.minY + b.maxY) / 2 };
    this.zoom = this.fitZoom;
  }

  /** Zooms by a factor keeping the world point under `at` (screen) where it is. */
  zoomBy(factor: number, at: Point = { x: this.width / 2, y: this.height / 2 }): void {
    const before = this.toWorld(at.x, at.y);
    this.zoom = Math.min(Math.max(this.zoom * factor, this.fitZoom / 4), MAX_ZOOM);
    const after = this.toWorld(at.x, at.y);
    this.center.x += before.x - after.x;
    this.center.y += before.y - after.y;
  }

  /** Centres a world point, zooming in until labels are readable. */
  centerOn(p: Point): void {
    this.center = { x: p.x, y: p.y };
    this.zoom = Math.max(this.zoom, 45);
  }

  /** The index of the node nearest to the screen point within its drawn radius (or 6 px), or undefined. */
  pick(xy: Float32Array, n: number, sx: number, sy: number): number | undefined {
    const w = this.toWorld(sx, sy);
    const radius = Math.max((this.pointSize() / 2 + 3) / this.zoom, 6 / this.zoom);
    let best = -1;
    let bestD = radius * radius;
    for (let i = 0; i < n; i++) {
      const dx = xy[2 * i] - w.x;
      const dy = xy[2 * i + 1] - w.y;
      const d = dx * dx + dy * dy;
      if (d <= bestD) {
        bestD = d;
        best = i;
      }
    }
    return best < 0 ? undefined : best;
  }

  /**
   * The quad (clip-space x, y and texture u, v per corner, as a triangle strip) that puts a layer drawn at view
   * `drawnAt` where it belongs in the current view.
   */
  layerQuad(drawnAt: { x: number; y: number; zoom: number }): Float32Array {
    const k = this.zoom / drawnAt.zoom;
    const W = this.width;
    const H = this.height;
    const dx = (drawnAt.x - this.center.x) * this.zoom;
    const dy = (drawnAt.y - this.center.y) * this.zoom;
    const corner = (sx: number, sy: number, u: number, t: number) => [
      (((sx - W / 2) * k + dx + W / 2) / W) * 2 - 1,
      1 - (((sy - H / 2) * k + dy + H / 2) / H) * 2,
      u,
      t,
    ];
    return new Float32Array([...corner(0, 0, 0, 1), ...corner(W, 0, 1, 1), ...corner(0, H, 0, 0), ...corner(W, H, 1, 0)]);
  }
}
