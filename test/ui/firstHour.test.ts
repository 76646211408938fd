import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { chromium, type Browser, type Page } from 'playwright-core';
import { eventually } from '../../support/stack.js';
import { layeredGraph } from '../../support/graphs.js';
import { decodePng } from '../../support/png.js';
import { chromiumOptions, ensureUiBuilt, waitForExpression } from '../../support/uiBuild.js';
import { useStack } from '../helpers/stackFixture.js';

// What a new user reaches for first in the web UI (issue 57), in headless Chromium without a GPU (WebGL on
// SwiftShader) against the real stack.

let browser: Browser;
const stack = useStack({ beforeStart: ensureUiBuilt, worker: true });
stack.onStart(async () => {
  browser = await chromium.launch(chromiumOptions);
});
stack.onStop(async () => {
  await browser?.close();
});

async function newPage(): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
  page.on('pageerror', (err) => console.error(`page error: ${err.message}`));
  return page;
}

async function put(graph: object): Promise<{ taskGraphId: string; ids: Map<string, string> }> {
  const taskGraphId = slugid.nice();
  const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graph);
  return { taskGraphId, ids: new Map(res.tasks.map((t) => [t.label, t.taskId])) };
}

/**
 * How much of the band between two rows of nodes is edge: the share of the canvas' pixels in that band that are
 * visibly darker than the white background (a pixel of an edge drawn at alpha a over white is 255 - a × 190).
 */
async function edgeInk(page: Page, fromY: number, toY: number): Promise<number> {
  const box = (await (await page.$('.canvas-wrap'))?.boundingBox()) as { x: number; y: number; width: number; height: number };
  const { width, height, rgba } = decodePng(await page.screenshot({ clip: { x: box.x, y: box.y + fromY, width: box.width, height: toY - fromY } }));
  let dark = 0;
  for (let i = 0; i < width * height; i++) if (rgba[i * 4] < 235 || rgba[i * 4 + 1] < 235) dark++;
  return dark / (width * height);
}

test('at the Fit zoom the edges of a 300-task graph are visible on a software renderer', async () => {
  // fan-in 1: 270 lone vertical edges (one 1-px line per column: 30 of the band's 1,400 px columns, 2.1 %); fan-in
  // 30: 8,100 edges at the faintest alpha, a web over most of the band. Before the fix both showed 0.0 %.
  for (const [fanIn, least] of [[1, 0.018], [30, 0.3]]) {
    const { graph } = layeredGraph(10, 30, 'nobody-fit', fanIn);
    const { taskGraphId } = await put({ ...graph, metadata: { name: `fit ${fanIn}` } });
    const page = await newPage();
    await page.goto(`${stack.api.rootUrl}/ui/task-graph/${taskGraphId}`);
    await waitForExpression(page, 'window.tgsGraph && window.tgsGraph.metrics.firstDraw !== undefined', 30_000);
    await page.click('.toolbar button:has-text("Fit")');
    // the band between the first two rows of nodes, away from the nodes themselves
    const rows = (await page.evaluate(`(() => { const s = window.tgsGraph; return [s.screenPosition(s.find('l0-0')).y, s.screenPosition(s.find('l1-0')).y]; })()`)) as number[];
    const gap = rows[1] - rows[0];
    let ink = 0;
    await eventually(async () => (ink = await edgeInk(page, rows[0] + gap * 0.3, rows[0] + gap * 0.7)) >= least, `fan-in ${fanIn}: edges on ${least * 100} % of the band`, 10_000).catch((err: Error) => {
      throw new Error(`${err.message} (saw ${(ink * 100).toFixed(1)} %)`);
    });
    await page.close();
  }
});
