// Draws the graph with WebGL2: edges as one LINES draw, nodes as one POINTS draw (colour from a per-node state
// byte, markers from a per-node flag byte), so a frame costs two draw calls whatever the size and a state change
// uploads one byte per node. Labels go on a 2D canvas on top, only when zoomed in far enough to read them.
// Pan (drag), zoom (wheel, buttons), fit, and click picking. The view's arithmetic is in camera.ts, the GLSL in
// shaders.ts, the flag bits in flags.ts.
import { stateRgb } from '../states';
import { ROW_GAP } from './layout';
import { Camera } from './camera';
import { AMEND_BITS, AMEND_SHIFT, FLAG_BLOCKING, FLAG_SELECTED } from './flags';
import { SUPERSEDED } from './amendMarks';
import { BLIT_FS, BLIT_VS, EDGE_FS, EDGE_VS, NODE_FS, NODE_VS } from './shaders';

function compileProgram(gl: WebGL2RenderingContext, vs: string, fs: string): WebGLProgram {
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

/** After the last wheel event, the edges are drawn again at full quality this much later. */
const SETTLE_MS = 150;

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
  private readonly camera = new Camera();
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
    this.nodeProgram = compileProgram(gl, NODE_VS, NODE_FS);
    this.edgeProgram = compileProgram(gl, EDGE_VS, EDGE_FS);
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
    this.blitProgram = compileProgram(gl, BLIT_VS, BLIT_FS);
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
    this.camera.computeFitZoom(graph.bounds);
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
    this.camera.fit(this.graph.bounds);
    this.requestDraw();
  }

  zoomBy(factor: number, at?: { x: number; y: number }): void {
    this.camera.zoomBy(factor, at);
    this.requestDraw();
  }

  /** Centres node idx, zooming in until labels are readable. */
  centerOn(idx: number): void {
    if (!this.graph) return;
    this.camera.centerOn({ x: this.graph.xy[2 * idx], y: this.graph.xy[2 * idx + 1] });
    this.requestDraw();
  }

  /** Where node idx is on screen, in CSS pixels relative to the canvas. */
  screenPosition(idx: number): { x: number; y: number } {
    const g = this.graph as RendererGraph;
    return this.camera.toScreen(g.xy[2 * idx], g.xy[2 * idx + 1]);
  }

  pick(sx: number, sy: number): number | undefined {
    const g = this.graph;
    return g ? this.camera.pick(g.xy, g.n, sx, sy) : undefined;
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

  private resize(): void {
    const parent = this.canvas.parentElement as HTMLElement;
    const dpr = window.devicePixelRatio || 1;
    const cam = this.camera;
    cam.resize(parent.clientWidth, parent.clientHeight, this.graph?.bounds);
    for (const c of [this.canvas, this.overlay]) {
      c.width = Math.round(cam.width * dpr);
      c.height = Math.round(cam.height * dpr);
      c.style.width = `${cam.width}px`;
      c.style.height = `${cam.height}px`;
    }
    this.resizeEdgeLayer();
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
    const cam = this.camera;
    this.ctx.clearRect(0, 0, cam.width, cam.height);
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
    // Colour blends; alpha stays what it was (opaque: everything starts from an opaque white clear). Blending alpha
    // too left the edge layer translucent where edges were (1 - a + a²), and the blit copies that alpha to the
    // canvas, which the page composites as premultiplied over white: a grey edge at alpha 0.06 came out brighter
    // than white, so a 300-task graph at the Fit zoom showed no edges at all (measured in SwiftShader Chromium:
    // 16,140 edge pixels in the layer, none on screen; test/ui/firstHour.test.ts).
    gl.blendFuncSeparate(gl.SRC_ALPHA, gl.ONE_MINUS_SRC_ALPHA, gl.ZERO, gl.ONE);

    const setView = (program: WebGLProgram) => {
      gl.useProgram(program);
      gl.uniform2f(gl.getUniformLocation(program, 'u_center'), cam.center.x, cam.center.y);
      gl.uniform1f(gl.getUniformLocation(program, 'u_zoom'), cam.zoom * dpr);
      gl.uniform2f(gl.getUniformLocation(program, 'u_viewport'), this.canvas.width, this.canvas.height);
    };
    // Edges: drawn into a texture once per view (100,000 lines cost ~100 ms on a software GPU); a frame that
    // only changes states, flags or the selection copies that texture. While the view moves the old texture
    // is moved along and the edges are drawn again once it settles.
    const moving = this.drag?.moved === true || performance.now() < this.settleUntil;
    const current = this.edgeView && this.edgeView.x === cam.center.x && this.edgeView.y === cam.center.y && this.edgeView.zoom === cam.zoom;
    if (!current && !(moving && this.edgeView)) {
      gl.bindFramebuffer(gl.FRAMEBUFFER, this.edgeFramebuffer as WebGLFramebuffer);
      gl.clear(gl.COLOR_BUFFER_BIT);
      setView(this.edgeProgram);
      const density = this.edgeCount / 2 / Math.max(1, (cam.zoom / cam.fitZoom) ** 2) / ((cam.width * cam.height) / 1e4);
      const alpha = Math.min(0.7, Math.max(0.06, 0.7 / Math.sqrt(Math.max(density, 1))));
      gl.uniform4f(gl.getUniformLocation(this.edgeProgram, 'u_color'), 0.25, 0.29, 0.34, alpha);
      gl.bindVertexArray(this.edgeVao);
      gl.drawArrays(gl.LINES, 0, this.edgeCount);
      gl.bindFramebuffer(gl.FRAMEBUFFER, null);
      this.edgeView = { x: cam.center.x, y: cam.center.y, zoom: cam.zoom };
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
    gl.uniform1f(gl.getUniformLocation(this.nodeProgram, 'u_size'), cam.pointSize() * dpr);
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
    const quad = this.camera.layerQuad(v);
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
    const cam = this.camera;
    const size = cam.pointSize();
    // Labels when neighbours are far enough apart for a few characters and rows for a line of text.
    const room = cam.zoom * g.xScale;
    const readable = room >= 40 && cam.zoom * ROW_GAP >= 16;
    const maxChars = Math.max(5, Math.floor(room / 7));
    let drawn = 0;
    for (let i = 0; i < g.n && drawn < 3000; i++) {
      const marked = (g.flags[i] & (FLAG_SELECTED | FLAG_BLOCKING)) !== 0;
      if (!readable && !marked) continue;
      const p = cam.toScreen(g.xy[2 * i], g.xy[2 * i + 1]);
      if (p.x < -100 || p.y < -20 || p.x > cam.width + 100 || p.y > cam.height + 20) continue;
      // a node an amend replaced is no member: named as such, not as an external task
      const replaced = (g.flags[i] & AMEND_BITS) >> AMEND_SHIFT === SUPERSEDED;
      let text = replaced ? `(replaced) ${g.labels[i]}`.trim() : g.labels[i] || '(external)';
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
      this.drag = { x: e.offsetX, y: e.offsetY, cx: this.camera.center.x, cy: this.camera.center.y, moved: false };
    });
    el.addEventListener('pointermove', (e) => {
      const d = this.drag;
      if (!d) return;
      const dx = e.offsetX - d.x;
      const dy = e.offsetY - d.y;
      if (!d.moved && dx * dx + dy * dy < 16) return;
      d.moved = true;
      this.camera.center = { x: d.cx - dx / this.camera.zoom, y: d.cy - dy / this.camera.zoom };
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
