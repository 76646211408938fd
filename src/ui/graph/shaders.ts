// The GLSL programs of the graph drawing. The flag bits and the number of state colours are written into the
// sources from the TypeScript constants, so the shaders cannot drift from what store.ts sets and states.ts colours.
// Also imported by node's unit tests: imports carry .js, and nothing here touches the DOM.
import { STATE_NAMES } from '../states.js';
import { AMEND_MARKS, markRgb, SUPERSEDED } from './amendMarks.js';
import { AMEND_SHIFT, FLAG_BLOCKING, FLAG_CACHED, FLAG_DIM, FLAG_HELD_BACK, FLAG_SELECTED } from './flags.js';

const STATE_COUNT = STATE_NAMES.length;
const bit = (flag: number) => `${flag}u`;

/**
 * The amend marks' rings (amendMarks.ts), one line of GLSL a mark: `solid` and `dashed` 2.5 pixels wide inside a pixel
 * of white, so the mark's colour stands apart from any state's fill (a teal ring on a completed node's green was lost),
 * `thin` 1.5 pixels, `faded` 1.5 pixels without the white; twelve dashes around the node (atan's angle × 6/π: every
 * other half of twelve units). A replaced node is washed out as well. Only on nodes of 7 pixels or more, like the other
 * rings.
 */
const amendRings = AMEND_MARKS.map((mark, code) => {
  if (mark.ring === 'none') return '';
  const rgb = markRgb(mark).map((v) => v.toFixed(3)).join(', ');
  const width = mark.ring === 'thin' || mark.ring === 'faded' ? 1.5 : 2.5;
  const halo = mark.ring === 'faded' ? 0 : 1;
  const dashes = mark.ring === 'dashed' || mark.ring === 'faded' ? ' && fract(atan(c.y, c.x) * 1.9099) < 0.5' : '';
  const colour = halo ? `(r > 1.0 - ${width.toFixed(1)} * px${dashes}) ? vec3(${rgb}) : vec3(1.0)` : `vec3(${rgb})`;
  const band = halo ? `r > 1.0 - ${(width + halo).toFixed(1)} * px` : `r > 1.0 - ${width.toFixed(1)} * px${dashes}`;
  return `  if (mark == ${code}u && v_size >= 7.0 && ${band}) col = ${colour};`;
})
  .filter((line) => line !== '')
  .join('\n');

export const NODE_VS = `#version 300 es
in vec2 a_pos;
in uint a_state;
in uint a_flags;
uniform vec2 u_center;
uniform float u_zoom;
uniform vec2 u_viewport;
uniform float u_size;
uniform vec3 u_colors[${STATE_COUNT}];
out vec3 v_color;
flat out uint v_flags;
out float v_size;
void main() {
  vec2 p = (a_pos - u_center) * u_zoom;
  gl_Position = vec4(p.x * 2.0 / u_viewport.x, -p.y * 2.0 / u_viewport.y, 0.0, 1.0);
  float size = u_size;
  if ((a_flags & ${bit(FLAG_BLOCKING)}) != 0u) size = max(size * 1.3, 16.0);
  if ((a_flags & ${bit(FLAG_SELECTED)}) != 0u) size = max(size, 14.0);
  gl_PointSize = size;
  v_size = size;
  v_color = u_colors[min(a_state, ${STATE_COUNT - 1}u)];
  v_flags = a_flags;
}`;

export const NODE_FS = `#version 300 es
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
  if ((v_flags & ${bit(FLAG_DIM)}) != 0u) { col = mix(col, vec3(1.0), 0.7); }
  if ((v_flags & ${bit(FLAG_HELD_BACK)}) != 0u) col = (v_size >= 7.0 && r < 0.5) ? vec3(1.0) : mix(col, vec3(0.55, 0.18, 0.1), 0.6);
  if (v_size >= 7.0 && r > 1.0 - 1.5 * px) col = col * 0.6;
  if ((v_flags & ${bit(FLAG_CACHED)}) != 0u && r > 0.3 && r < 0.55) col = vec3(1.0);
  uint mark = (v_flags >> ${AMEND_SHIFT}u) & 7u;
  if (mark == ${SUPERSEDED}u) col = mix(col, vec3(1.0), 0.7);
${amendRings}
  if ((v_flags & ${bit(FLAG_BLOCKING)}) != 0u && r > 1.0 - 5.0 * px) col = (r > 1.0 - 2.5 * px) ? vec3(0.0) : vec3(1.0, 0.85, 0.0);
  if ((v_flags & ${bit(FLAG_SELECTED)}) != 0u && r > 1.0 - 3.5 * px) col = vec3(0.0, 0.75, 1.0);
  o_color = vec4(col, 1.0);
}`;

export const EDGE_VS = `#version 300 es
in vec2 a_pos;
uniform vec2 u_center;
uniform float u_zoom;
uniform vec2 u_viewport;
void main() {
  vec2 p = (a_pos - u_center) * u_zoom;
  gl_Position = vec4(p.x * 2.0 / u_viewport.x, -p.y * 2.0 / u_viewport.y, 0.0, 1.0);
}`;

export const EDGE_FS = `#version 300 es
precision mediump float;
uniform vec4 u_color;
out vec4 o_color;
void main() { o_color = u_color; }`;

/** Copies the cached edge layer to the screen (moved and scaled while a pan or zoom is under way). */
export const BLIT_VS = `#version 300 es
in vec2 a_pos;
in vec2 a_uv;
out vec2 v_uv;
void main() { v_uv = a_uv; gl_Position = vec4(a_pos, 0.0, 1.0); }`;

export const BLIT_FS = `#version 300 es
precision mediump float;
in vec2 v_uv;
uniform sampler2D u_tex;
out vec4 o_color;
void main() { o_color = texture(u_tex, v_uv); }`;
