// Draws the graph with WebGL2: edges as one LINES draw, nodes as one POINTS draw (colour from a per-node state
// byte, markers from a per-node flag byte), so a frame costs two draw calls whatever the size and a state change
// uploads one byte per node. Labels go on a 2D canvas on top, only when zoomed in far enough to read them.
// Pan (drag), zoom (wheel, buttons), fit, and click picking (nearest node under the pointer).
import { stateRgb } from '../states';
import { ROW_GAP } from './layout';

export const FLAG_SELECTED = 1;
export const FLAG_BLOCKING = 2;
export const FLAG_HELD_BACK = 4;
export const FLAG_DIM = 8;

/** World units: neighbours in a row are 1 apart; a node is this wide. */
const NODE_SIZE = 0.62;
/** A small graph is not blown up beyond this many pixels per world unit. */
const MAX_FIT_ZOOM = 70;

const NODE_VS = `#version 300 es
in vec2 a_pos;
in uint a_state;
in uint a_flags;
uniform vec2 u_center;
uniform float u_zoom;
uniform vec2 u_viewport;
uniform float u_size;
uniform vec3 u_colors[7];
out vec3 v_color;
flat out uint v_flags;
out float v_size;
void main() {
  vec2 p = (a_pos - u_center) * u_zoom;
  gl_Position = vec4(p.x * 2.0 / u_viewport.x, -p.y * 2.0 / u_viewport.y, 0.0, 1.0);
  float size = u_size;
  if ((a_flags & 2u) != 0u) size = max(size * 1.3, 16.0);
  if ((a_flags & 1u) != 0u) size = max(size, 14.0);
  gl_PointSize = size;
  v_size = size;
  v_color = u_colors[min(a_state, 6u)];
  v_flags = a_flags;
}`;

const NODE_FS = `#version 300 es
precision mediump float;
in vec3 v_color;
flat in uint v_flags;
in float v_size;
out vec4 o_color;
void main() {
  vec2 c = gl_PointCoord * 2.0 - 1.0;
  float r = length(c);
  if (r > 1.0) discard;
  float px = 2.0 / v_size;
  vec3 col = v_color;
  float alpha = 1.0;
  if ((v_flags & 8u) != 0u) { col = mix(col, vec3(1.0), 0.7); }
  if ((v_flags & 4u) != 0u) col = (v_size >= 7.0 && r < 0.5) ? vec3(1.0) : mix(col, vec3(0.55, 0.18, 0.1), 0.6);
  if (v_size >= 7.0 && r > 1.0 - 1.5 * px) col = col * 0.6;
  if ((v_flags & 2u) != 0u && r > 1.0 - 5.0 * px) col = (r > 1.0 - 2.5 * px) ? vec3(0.0) : vec3(1.0, 0.85, 0.0);
  if ((v_flags & 1u) != 0u && r > 1.0 - 3.5 * px) col = vec3(0.0, 0.75, 1.0);
  o_color = vec4(col, alpha);
}`;

const EDGE_VS = `#version 300 es
in vec2 a_pos;
uniform vec2 u_center;
uniform float u_zoom;
uniform vec2 u_viewport;
void main() {
  vec2 p = (a_pos - u_center) * u_zoom;
  gl_Position = vec4(p.x * 2.0 / u_viewport.x, -p.y * 2.0 / u_viewport.y, 0.0, 1.0);
}`;

const EDGE_FS = `#version 300 es
precision mediump float;
uniform vec4 u_color;
out vec4 o_color;
void main() { o_color = u_color; }`;

// Copies the cached edge layer to the screen (moved and scaled while a pan or zoom is under way).
const BLIT_VS = `#version 300 es
in vec2 a_pos;
in vec2 a_uv;
out vec2 v_uv;
void main() { v_uv = a_uv; gl_Position = vec4(a_pos, 0.0, 1.0); }`;

const BLIT_FS = `#version 300 es
precision mediump float;
in vec2 v_uv;
uniform sampler2D u_tex;
out vec4 o_color;
void main() { o_color = texture(u_tex, v_uv); }`;

/** After the last wheel event, the edges are drawn again at full quality this much later. */
const SETTLE_MS = 150;

function compile(gl: WebGL2RenderingContext, vs: string, fs: string): WebGLProgram {
  const program = gl.createProgram() as WebGLProgram;
  for (const [type, source] of [[gl.VERTEX_SHADER, vs], [gl.FRAGMENT_SHADER, fs]] as const) {
    const shader = gl.createShader(type) as WebGLShader;
    gl.shaderSource(shader, source);
    gl.compileShader(shader);
    if (!gl.getShaderParameter(shader, gl.COMPILE_STATUS)) throw new Error(`shader: ${gl.getShaderInfoLog(shader)}`);
    gl.attachShader(program, shader);
  }
  gl.linkProgram(program);
  if (!gl.getProgramParameter(program, gl.LINK_STATUS)) throw new Error(`program: ${gl.getProgramInfoLog(program)}`);
  return program;
}

export interface RendererGraph {
  n: number;
  xy: Float32Array;
  edges: Float32Array;
  states: Uint8Array;
  flags: Uint8Array;
  labels: string[];
  bounds: { minX: number; maxX: number; minY: number; maxY: number };
  /** Distance between neighbours in a row, world units. */
  xScale: number;
}

export class GraphRenderer {
  private gl: WebGL2RenderingContext;
  private ctx: CanvasRenderingContext2D;
  private nodeProgram: WebGLProgram;
  private edgeProgram: WebGLProgram;
  private nodeVao: WebGLVertexArrayObject;
  private edgeVao: WebGLVertexArrayObject;
  private highlightVao: WebGLVertexArrayObject;
  private posBuffer: WebGLBuffer;
  private stateBuffer: WebGLBuffer;
  private flagBuffer: WebGLBuffer;
  private edgeBuffer: WebGLBuffer;
  private highlightBuffer: WebGLBuffer;
  private highlightCount = 0;
  private blitProgram: WebGLProgram;
  private blitVao: WebGLVertexArrayObject;
  private blitBuffer: WebGLBuffer;
  private edgeTexture: WebGLTexture | undefined;
  private edgeFramebuffer: WebGLFramebuffer | undefined;
  /** The view the edge layer was drawn at; undefined when it must be drawn again. */
  private edgeView: { x: number; y: number; zoom: number } | undefined;
  private settleUntil = 0;
  private settleTimer: ReturnType<typeof setTimeout> | undefined;
  private graph: RendererGraph | undefined;
  private edgeCount = 0;
  private center = { x: 0, y: 0 };
  private zoom = 1;
  private fitZoom = 1;
  private width = 1;
  private height = 1;
  private frame = 0;
  private dirtyStates = false;
  private dirtyFlags = false;
  private resizeObserver: ResizeObserver;
  private drag: { x: number; y: number; cx: number; cy: number; moved: boolean } | undefined;
  /** Called after each frame is drawn (with the frame's time). */
  onDraw: ((now: number) => void) | undefined;
  onPick: ((idx: number | undefined) => void) | undefined;

  constructor(
    private readonly canvas: HTMLCanvasElement,
    private readonly overlay: HTMLCanvasElement,
  ) {
    const gl = canvas.getContext('webgl2', { antialias: false });
    if (!gl) throw new Error('This browser has no WebGL2: the graph cannot be drawn (the table below still lists every task).');
    this.gl = gl;
    this.ctx = overlay.getContext('2d') as CanvasRenderingContext2D;
    this.nodeProgram = compile(gl, NODE_VS, NODE_FS);
    this.edgeProgram = compile(gl, EDGE_VS, EDGE_FS);
    this.posBuffer = gl.createBuffer() as WebGLBuffer;
    this.stateBuffer = gl.createBuffer() as WebGLBuffer;
    this.flagBuffer = gl.createBuffer() as WebGLBuffer;
    this.edgeBuffer = gl.createBuffer() as WebGLBuffer;
    this.highlightBuffer = gl.createBuffer() as WebGLBuffer;

    this.nodeVao = gl.createVertexArray() as WebGLVertexArrayObject;
    gl.bindVertexArray(this.nodeVao);
    const loc = (name: string) => gl.getAttribLocation(this.nodeProgram, name);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.posBuffer);
    gl.enableVertexAttribArray(loc('a_pos'));
    gl.vertexAttribPointer(loc('a_pos'), 2, gl.FLOAT, false, 0, 0);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.stateBuffer);
    gl.enableVertexAttribArray(loc('a_state'));
    gl.vertexAttribIPointer(loc('a_state'), 1, gl.UNSIGNED_BYTE, 0, 0);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.flagBuffer);
    gl.enableVertexAttribArray(loc('a_flags'));
    gl.vertexAttribIPointer(loc('a_flags'), 1, gl.UNSIGNED_BYTE, 0, 0);

    const edgeLoc = gl.getAttribLocation(this.edgeProgram, 'a_pos');
    this.edgeVao = gl.createVertexArray() as WebGLVertexArrayObject;
    gl.bindVertexArray(this.edgeVao);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.edgeBuffer);
    gl.enableVertexAttribArray(edgeLoc);
    gl.vertexAttribPointer(edgeLoc, 2, gl.FLOAT, false, 0, 0);
    this.blitProgram = compile(gl, BLIT_VS, BLIT_FS);
    this.blitBuffer = gl.createBuffer() as WebGLBuffer;
    this.blitVao = gl.createVertexArray() as WebGLVertexArrayObject;
    gl.bindVertexArray(this.blitVao);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.blitBuffer);
    const blitPos = gl.getAttribLocation(this.blitProgram, 'a_pos');
    const blitUv = gl.getAttribLocation(this.blitProgram, 'a_uv');
    gl.enableVertexAttribArray(blitPos);
    gl.vertexAttribPointer(blitPos, 2, gl.FLOAT, false, 16, 0);
    gl.enableVertexAttribArray(blitUv);
    gl.vertexAttribPointer(blitUv, 2, gl.FLOAT, false, 16, 8);
    this.highlightVao = gl.createVertexArray() as WebGLVertexArrayObject;
    gl.bindVertexArray(this.highlightVao);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.highlightBuffer);
    gl.enableVertexAttribArray(edgeLoc);
    gl.vertexAttribPointer(edgeLoc, 2, gl.FLOAT, false, 0, 0);
    gl.bindVertexArray(null);

    this.resizeObserver = new ResizeObserver(() => this.resize());
    this.resizeObserver.observe(canvas.parentElement as Element);
    this.resize();
    this.attachInput();
  }

  /** A new graph (or the same one extended): uploads positions and edges; keeps the view unless told to fit. */
  setGraph(graph: RendererGraph, fit: boolean): void {
    const gl = this.gl;
    this.graph = graph;
    gl.bindBuffer(gl.ARRAY_BUFFER, this.posBuffer);
    gl.bufferData(gl.ARRAY_BUFFER, graph.xy, gl.STATIC_DRAW);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.stateBuffer);
    gl.bufferData(gl.ARRAY_BUFFER, graph.states, gl.DYNAMIC_DRAW);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.flagBuffer);
    gl.bufferData(gl.ARRAY_BUFFER, graph.flags, gl.DYNAMIC_DRAW);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.edgeBuffer);
    gl.bufferData(gl.ARRAY_BUFFER, graph.edges, gl.STATIC_DRAW);
    this.edgeCount = graph.edges.length / 2;
    this.edgeView = undefined;
    this.computeFitZoom();
    if (fit) this.fit();
    else this.requestDraw();
  }

  /** States changed (the array given to setGraph was written to). */
  statesChanged(): void {
    this.dirtyStates = true;
    this.requestDraw();
  }

  flagsChanged(): void {
    this.dirtyFlags = true;
    this.requestDraw();
  }

  /** Segments to emphasise (the selected node's requires and dependents): x1, y1, x2, y2 each. */
  setHighlight(segments: Float32Array): void {
    const gl = this.gl;
    gl.bindBuffer(gl.ARRAY_BUFFER, this.highlightBuffer);
    gl.bufferData(gl.ARRAY_BUFFER, segments, gl.DYNAMIC_DRAW);
    this.highlightCount = segments.length / 2;
    this.requestDraw();
  }

  fit(): void {
    if (!this.graph) return;
    const b = this.graph.bounds;
    this.center = { x: (b.minX + b.maxX) / 2, y: (b.minY + b.maxY) / 2 };
    this.zoom = this.fitZoom;
    this.requestDraw();
  }

  zoomBy(factor: number, at?: { x: number; y: number }): void {
    const p = at ?? { x: this.width / 2, y: this.height / 2 };
    const before = this.toWorld(p.x, p.y);
    this.zoom = Math.min(Math.max(this.zoom * factor, this.fitZoom / 4), 400);
    const after = this.toWorld(p.x, p.y);
    this.center.x += before.x - after.x;
    this.center.y += before.y - after.y;
    this.requestDraw();
  }

  /** Centres node idx, zooming in until labels are readable. */
  centerOn(idx: number): void {
    if (!this.graph) return;
    this.center = { x: this.graph.xy[2 * idx], y: this.graph.xy[2 * idx + 1] };
    this.zoom = Math.max(this.zoom, 45);
    this.requestDraw();
  }

  /** Where node idx is on screen, in CSS pixels relative to the canvas. */
  screenPosition(idx: number): { x: number; y: number } {
    const g = this.graph as RendererGraph;
    return this.toScreen(g.xy[2 * idx], g.xy[2 * idx + 1]);
  }

  pick(sx: number, sy: number): number | undefined {
    const g = this.graph;
    if (!g) return undefined;
    const w = this.toWorld(sx, sy);
    const radius = Math.max((this.pointSize() / 2 + 3) / this.zoom, 6 / this.zoom);
    let best = -1;
    let bestD = radius * radius;
    for (let i = 0; i < g.n; i++) {
      const dx = g.xy[2 * i] - w.x;
      const dy = g.xy[2 * i + 1] - w.y;
      const d = dx * dx + dy * dy;
      if (d <= bestD) {
        bestD = d;
        best = i;
      }
    }
    return best < 0 ? undefined : best;
  }

  destroy(): void {
    cancelAnimationFrame(this.frame);
    clearTimeout(this.settleTimer);
    this.resizeObserver.disconnect();
    this.gl.getExtension('WEBGL_lose_context')?.loseContext();
  }

  requestDraw(): void {
    if (this.frame) return;
    this.frame = requestAnimationFrame((now) => {
      this.frame = 0;
      this.draw();
      this.onDraw?.(now);
    });
  }

  private pointSize(): number {
    return Math.min(Math.max(NODE_SIZE * this.zoom, 2.5), 48);
  }

  private toWorld(sx: number, sy: number) {
    return { x: (sx - this.width / 2) / this.zoom + this.center.x, y: (sy - this.height / 2) / this.zoom + this.center.y };
  }

  private toScreen(wx: number, wy: number) {
    return { x: (wx - this.center.x) * this.zoom + this.width / 2, y: (wy - this.center.y) * this.zoom + this.height / 2 };
  }

  private computeFitZoom(): void {
    if (!this.graph) return;
    const b = this.graph.bounds;
    this.fitZoom = Math.min(this.width / (b.maxX - b.minX + 3), this.height / (b.maxY - b.minY + 3), MAX_FIT_ZOOM);
  }

  private resize(): void {
    const parent = this.canvas.parentElement as HTMLElement;
    const dpr = window.devicePixelRatio || 1;
    this.width = Math.max(1, parent.clientWidth);
    this.height = Math.max(1, parent.clientHeight);
    for (const c of [this.canvas, this.overlay]) {
      c.width = Math.round(this.width * dpr);
      c.height = Math.round(this.height * dpr);
      c.style.width = `${this.width}px`;
      c.style.height = `${this.height}px`;
    }
    this.resizeEdgeLayer();
    const wasFit = Math.abs(this.zoom - this.fitZoom) < 1e-9;
    this.computeFitZoom();
    if (wasFit) this.zoom = this.fitZoom;
    this.requestDraw();
  }

  private draw(): void {
    const gl = this.gl;
    const g = this.graph;
    const dpr = window.devicePixelRatio || 1;
    gl.viewport(0, 0, this.canvas.width, this.canvas.height);
    gl.clearColor(1, 1, 1, 1);
    gl.clear(gl.COLOR_BUFFER_BIT);
    this.ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    this.ctx.clearRect(0, 0, this.width, this.height);
    if (!g) return;
    if (this.dirtyStates) {
      gl.bindBuffer(gl.ARRAY_BUFFER, this.stateBuffer);
      gl.bufferSubData(gl.ARRAY_BUFFER, 0, g.states);
      this.dirtyStates = false;
    }
    if (this.dirtyFlags) {
      gl.bindBuffer(gl.ARRAY_BUFFER, this.flagBuffer);
      gl.bufferSubData(gl.ARRAY_BUFFER, 0, g.flags);
      this.dirtyFlags = false;
    }
    gl.enable(gl.BLEND);
    gl.blendFunc(gl.SRC_ALPHA, gl.ONE_MINUS_SRC_ALPHA);

    const setView = (program: WebGLProgram) => {
      gl.useProgram(program);
      gl.uniform2f(gl.getUniformLocation(program, 'u_center'), this.center.x, this.center.y);
      gl.uniform1f(gl.getUniformLocation(program, 'u_zoom'), this.zoom * dpr);
      gl.uniform2f(gl.getUniformLocation(program, 'u_viewport'), this.canvas.width, this.canvas.height);
    };
    // Edges: drawn into a texture once per view (100,000 lines cost ~100 ms on a software GPU); a frame that
    // only changes states, flags or the selection copies that texture. While the view moves the old texture
    // is moved along and the edges are drawn again once it settles.
    const moving = this.drag?.moved === true || performance.now() < this.settleUntil;
    const current = this.edgeView && this.edgeView.x === this.center.x && this.edgeView.y === this.center.y && this.edgeView.zoom === this.zoom;
    if (!current && !(moving && this.edgeView)) {
      gl.bindFramebuffer(gl.FRAMEBUFFER, this.edgeFramebuffer as WebGLFramebuffer);
      gl.clear(gl.COLOR_BUFFER_BIT);
      setView(this.edgeProgram);
      const density = this.edgeCount / 2 / Math.max(1, (this.zoom / this.fitZoom) ** 2) / ((this.width * this.height) / 1e4);
      const alpha = Math.min(0.7, Math.max(0.06, 0.7 / Math.sqrt(Math.max(density, 1))));
      gl.uniform4f(gl.getUniformLocation(this.edgeProgram, 'u_color'), 0.25, 0.29, 0.34, alpha);
      gl.bindVertexArray(this.edgeVao);
      gl.drawArrays(gl.LINES, 0, this.edgeCount);
      gl.bindFramebuffer(gl.FRAMEBUFFER, null);
      this.edgeView = { x: this.center.x, y: this.center.y, zoom: this.zoom };
    } else if (!current) {
      this.scheduleSettle();
    }
    this.blitEdges();
    setView(this.edgeProgram);
    if (this.highlightCount) {
      gl.uniform4f(gl.getUniformLocation(this.edgeProgram, 'u_color'), 0.0, 0.55, 0.85, 0.95);
      gl.bindVertexArray(this.highlightVao);
      gl.drawArrays(gl.LINES, 0, this.highlightCount);
    }
    // Nodes.
    setView(this.nodeProgram);
    gl.uniform1f(gl.getUniformLocation(this.nodeProgram, 'u_size'), this.pointSize() * dpr);
    gl.uniform3fv(gl.getUniformLocation(this.nodeProgram, 'u_colors'), stateRgb());
    gl.bindVertexArray(this.nodeVao);
    gl.drawArrays(gl.POINTS, 0, g.n);
    gl.bindVertexArray(null);
    this.drawLabels(g);
  }

  private resizeEdgeLayer(): void {
    const gl = this.gl;
    if (this.edgeTexture) gl.deleteTexture(this.edgeTexture);
    if (this.edgeFramebuffer) gl.deleteFramebuffer(this.edgeFramebuffer);
    this.edgeTexture = gl.createTexture() as WebGLTexture;
    gl.bindTexture(gl.TEXTURE_2D, this.edgeTexture);
    gl.texImage2D(gl.TEXTURE_2D, 0, gl.RGBA8, this.canvas.width, this.canvas.height, 0, gl.RGBA, gl.UNSIGNED_BYTE, null);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MIN_FILTER, gl.LINEAR);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_MAG_FILTER, gl.LINEAR);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_S, gl.CLAMP_TO_EDGE);
    gl.texParameteri(gl.TEXTURE_2D, gl.TEXTURE_WRAP_T, gl.CLAMP_TO_EDGE);
    this.edgeFramebuffer = gl.createFramebuffer() as WebGLFramebuffer;
    gl.bindFramebuffer(gl.FRAMEBUFFER, this.edgeFramebuffer);
    gl.framebufferTexture2D(gl.FRAMEBUFFER, gl.COLOR_ATTACHMENT0, gl.TEXTURE_2D, this.edgeTexture, 0);
    gl.bindFramebuffer(gl.FRAMEBUFFER, null);
    this.edgeView = undefined;
  }

  /** The edge layer on screen, moved from the view it was drawn at to the current one. */
  private blitEdges(): void {
    const gl = this.gl;
    const v = this.edgeView;
    if (!v) return;
    const k = this.zoom / v.zoom;
    const W = this.width;
    const H = this.height;
    const dx = (v.x - this.center.x) * this.zoom;
    const dy = (v.y - this.center.y) * this.zoom;
    const corner = (sx: number, sy: number, u: number, t: number) => [((sx - W / 2) * k + dx + W / 2) / W * 2 - 1, 1 - ((sy - H / 2) * k + dy + H / 2) / H * 2, u, t];
    const quad = new Float32Array([...corner(0, 0, 0, 1), ...corner(W, 0, 1, 1), ...corner(0, H, 0, 0), ...corner(W, H, 1, 0)]);
    gl.disable(gl.BLEND);
    gl.useProgram(this.blitProgram);
    gl.activeTexture(gl.TEXTURE0);
    gl.bindTexture(gl.TEXTURE_2D, this.edgeTexture as WebGLTexture);
    gl.uniform1i(gl.getUniformLocation(this.blitProgram, 'u_tex'), 0);
    gl.bindVertexArray(this.blitVao);
    gl.bindBuffer(gl.ARRAY_BUFFER, this.blitBuffer);
    gl.bufferData(gl.ARRAY_BUFFER, quad, gl.STREAM_DRAW);
    gl.drawArrays(gl.TRIANGLE_STRIP, 0, 4);
    gl.enable(gl.BLEND);
  }

  /** Draw the edges again once the pan or zoom has stopped. */
  private scheduleSettle(): void {
    clearTimeout(this.settleTimer);
    this.settleTimer = setTimeout(() => {
      if (this.drag?.moved) return;
      this.settleUntil = 0;
      this.requestDraw();
    }, Math.max(20, this.settleUntil - performance.now() + 5));
  }

  /** Labels of the visible nodes once they are far enough apart to read (and always the marked ones). */
  private drawLabels(g: RendererGraph): void {
    const ctx = this.ctx;
    ctx.font = '12px system-ui, sans-serif';
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    ctx.lineWidth = 3;
    ctx.strokeStyle = 'rgba(255,255,255,0.9)';
    ctx.fillStyle = '#202124';
    const size = this.pointSize();
    // Labels when neighbours are far enough apart for a few characters and rows for a line of text.
    const room = this.zoom * g.xScale;
    const readable = room >= 40 && this.zoom * ROW_GAP >= 16;
    const maxChars = Math.max(5, Math.floor(room / 7));
    let drawn = 0;
    for (let i = 0; i < g.n && drawn < 3000; i++) {
      const marked = (g.flags[i] & (FLAG_SELECTED | FLAG_BLOCKING)) !== 0;
      if (!readable && !marked) continue;
      const p = this.toScreen(g.xy[2 * i], g.xy[2 * i + 1]);
      if (p.x < -100 || p.y < -20 || p.x > this.width + 100 || p.y > this.height + 20) continue;
      let text = g.labels[i] || '(external)';
      if (text.length > maxChars && !marked) text = `${text.slice(0, maxChars - 1)}…`;
      const y = p.y + (g.flags[i] & FLAG_BLOCKING ? Math.max(size * 1.3, 16) : size) / 2 + 2;
      ctx.strokeText(text, p.x, y);
      ctx.fillText(text, p.x, y);
      drawn++;
    }
  }

  private attachInput(): void {
    const el = this.overlay;
    el.addEventListener('pointerdown', (e) => {
      el.setPointerCapture(e.pointerId);
      this.drag = { x: e.offsetX, y: e.offsetY, cx: this.center.x, cy: this.center.y, moved: false };
    });
    el.addEventListener('pointermove', (e) => {
      const d = this.drag;
      if (!d) return;
      const dx = e.offsetX - d.x;
      const dy = e.offsetY - d.y;
      if (!d.moved && dx * dx + dy * dy < 16) return;
      d.moved = true;
      this.center = { x: d.cx - dx / this.zoom, y: d.cy - dy / this.zoom };
      this.requestDraw();
    });
    el.addEventListener('pointerup', (e) => {
      const d = this.drag;
      this.drag = undefined;
      if (d && !d.moved) this.onPick?.(this.pick(e.offsetX, e.offsetY));
      else this.requestDraw();
    });
    el.addEventListener('pointercancel', () => {
      this.drag = undefined;
      this.requestDraw();
    });
    el.addEventListener(
      'wheel',
      (e) => {
        e.preventDefault();
        this.settleUntil = performance.now() + SETTLE_MS;
        this.zoomBy(Math.exp(-e.deltaY * 0.0015), { x: e.offsetX, y: e.offsetY });
      },
      { passive: false },
    );
  }
}
