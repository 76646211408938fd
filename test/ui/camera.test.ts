import { test } from 'node:test';
import assert from 'node:assert/strict';
import { Camera, MAX_FIT_ZOOM, MAX_ZOOM } from '../../src/ui/graph/camera.js';
import { NODE_FS, NODE_VS } from '../../src/ui/graph/shaders.js';
import { FLAG_BLOCKING, FLAG_DIM, FLAG_HELD_BACK, FLAG_SELECTED } from '../../src/ui/graph/flags.js';
import { STATE_NAMES } from '../../src/ui/states.js';

const bounds = { minX: 0, maxX: 97, minY: 0, maxY: 47 };

function camera(width = 1000, height = 500) {
  const cam = new Camera();
  cam.resize(width, height, bounds);
  cam.fit(bounds);
  return cam;
}

test('screen and world coordinates are inverse of each other', () => {
  const cam = camera();
  cam.zoomBy(3.7, { x: 123, y: 77 });
  for (const [sx, sy] of [[0, 0], [500, 250], [999, 1], [123, 77]]) {
    const w = cam.toWorld(sx, sy);
    const s = cam.toScreen(w.x, w.y);
    assert.ok(Math.abs(s.x - sx) < 1e-9 && Math.abs(s.y - sy) < 1e-9, `${sx},${sy} → ${s.x},${s.y}`);
  }
});

test('fit centres the bounds and shows them whole; a tiny graph is not blown up', () => {
  const cam = camera();
  assert.deepEqual(cam.center, { x: 48.5, y: 23.5 });
  assert.equal(cam.zoom, Math.min(1000 / 100, 500 / 50));
  const topLeft = cam.toScreen(bounds.minX, bounds.minY);
  const bottomRight = cam.toScreen(bounds.maxX, bounds.maxY);
  assert.ok(topLeft.x >= 0 && topLeft.y >= 0 && bottomRight.x <= 1000 && bottomRight.y <= 500);
  const small = new Camera();
  small.resize(1000, 500, { minX: 0, maxX: 1, minY: 0, maxY: 1 });
  assert.equal(small.fitZoom, MAX_FIT_ZOOM);
});

test('zooming keeps the point under the cursor in place and stays within its limits', () => {
  const cam = camera();
  const at = { x: 800, y: 100 };
  const before = cam.toWorld(at.x, at.y);
  cam.zoomBy(2.5, at);
  const after = cam.toWorld(at.x, at.y);
  assert.ok(Math.abs(before.x - after.x) < 1e-9 && Math.abs(before.y - after.y) < 1e-9);
  cam.zoomBy(1e9, at);
  assert.equal(cam.zoom, MAX_ZOOM);
  cam.zoomBy(1e-9, at);
  assert.equal(cam.zoom, cam.fitZoom / 4);
});

test('a fitted view stays fitted when the viewport changes; a zoomed one keeps its zoom', () => {
  const cam = camera();
  cam.resize(400, 400, bounds);
  assert.equal(cam.zoom, cam.fitZoom);
  assert.equal(cam.fitZoom, 4);
  cam.zoomBy(2);
  const zoom = cam.zoom;
  cam.resize(800, 800, bounds);
  assert.equal(cam.zoom, zoom);
});

test('pick finds the nearest node within its radius and nothing elsewhere', () => {
  const cam = camera();
  const xy = new Float32Array([10, 10, 11, 10, 50, 30]);
  const s = cam.toScreen(11, 10);
  assert.equal(cam.pick(xy, 3, s.x + 1, s.y), 1);
  const far = cam.toScreen(30, 40);
  assert.equal(cam.pick(xy, 3, far.x, far.y), undefined);
});

test('the layer quad is the full screen when drawn at the current view, and follows a pan', () => {
  const cam = camera();
  const same = [...cam.layerQuad({ ...cam.center, zoom: cam.zoom })];
  assert.deepEqual(same, [-1, 1, 0, 1, 1, 1, 1, 1, -1, -1, 0, 0, 1, -1, 1, 0]);
  const drawnAt = { ...cam.center, zoom: cam.zoom };
  cam.center = { x: cam.center.x + 10, y: cam.center.y };
  const moved = cam.layerQuad(drawnAt);
  // the layer moves left by 10 world units = 10 * zoom pixels = 2 * 10 * zoom / width in clip space
  assert.ok(Math.abs(moved[0] - (-1 - (2 * 10 * cam.zoom) / cam.width)) < 1e-6);
});

test('the shaders are generated from the flag bits and the state count', () => {
  for (const flag of [FLAG_SELECTED, FLAG_BLOCKING, FLAG_HELD_BACK, FLAG_DIM]) {
    assert.ok(NODE_FS.includes(`& ${flag}u)`), `fragment shader tests flag ${flag}`);
  }
  assert.ok(NODE_VS.includes(`u_colors[${STATE_NAMES.length}]`));
  assert.ok(NODE_VS.includes(`min(a_state, ${STATE_NAMES.length - 1}u)`));
});
