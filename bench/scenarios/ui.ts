import slugid from 'slugid';
import { chromium, type Page } from 'playwright-core';
import { layeredGraph } from '../../support/graphs.js';
import { chromiumOptions, ensureUiBuilt, waitForExpression } from '../../support/uiBuild.js';
import { csrFromCounts, layoutGraph } from '../../src/ui/graph/layout.js';
import { percentile } from '../stats.js';
import type { BenchStack, Sizes } from '../scenario.js';

/**
 * The graph explorer in headless Chromium (`--disable-gpu`: WebGL on SwiftShader, the CPU): for layered graphs of
 * 1k / 10k / 30k / 100k tasks (fan-in 4, ≈3.9 edges per task), the page's own timings from opening the page —
 * nodes answer fetched, layout (in the Web Worker), first frame drawn with the counts in the page — and the layout
 * alone in Node. Then, on one graph, 1,000 task state changes a second for 5 s (written straight into Postgres: the
 * queue alone does not reach that rate on this machine, and the page only sees the changes feed): the frame gaps of
 * the page meanwhile and the time from each change's commit to the frame that drew it.
 */

const SHAPES: Record<number, { layers: number; width: number }> = {
  1000: { layers: 10, width: 100 },
  10_000: { layers: 20, width: 500 },
  30_000: { layers: 30, width: 1000 },
  100_000: { layers: 100, width: 1000 },
};

/** Layout alone, in Node (the page does the same in its worker). */
function nodeLayoutMs(graph: ReturnType<typeof layeredGraph>['graph']): number {
  const labels = Object.keys(graph.tasks);
  const index = new Map(labels.map((l, i) => [l, i]));
  const counts = labels.map((l) => graph.tasks[l].requires.length);
  const flat = labels.flatMap((l) => graph.tasks[l].requires.map((r) => index.get(r) as number));
  const t0 = performance.now();
  const { reqStart, req } = csrFromCounts(counts, flat);
  layoutGraph({ n: labels.length, reqStart, req });
  return Math.round(performance.now() - t0);
}

interface PageMetrics {
  dataMs: number;
  layoutMs: number;
  firstDraw: number;
  nodes: number;
  edges: number;
}

async function openGraph(page: Page, rootUrl: string, taskGraphId: string): Promise<PageMetrics> {
  await page.goto(`${rootUrl}/ui/task-graph/${taskGraphId}`);
  await waitForExpression(page, 'window.tgsGraph && window.tgsGraph.metrics.firstDraw !== undefined', 120_000);
  return (await page.evaluate('window.tgsGraph.metrics')) as PageMetrics;
}

/** 1,000 state changes a second for `seconds`, in batches of 100 every 100 ms; page frame gaps and change → drawn. */
async function liveScenario(stack: BenchStack, page: Page, taskGraphId: string, seconds: number) {
  const pool = stack.api.db.pool;
  const { rows } = await pool.query<{ task_id: string }>('SELECT task_id FROM tasks WHERE task_group_id = $1 ORDER BY task_id', [taskGraphId]);
  await page.evaluate(`(() => {
    window.benchGaps = [];
    let last = performance.now();
    function frame(now) { window.benchGaps.push(now - last); last = now; if (!window.benchStop) requestAnimationFrame(frame); }
    requestAnimationFrame(frame);
  })()`);
  const states = ['running', 'completed', 'failed', 'pending', 'exception'];
  const committed = new Map<string, number>();
  const batches = seconds * 10;
  for (let b = 0; b < batches; b++) {
    const t0 = Date.now();
    const from = (b * 100) % rows.length;
    const batch = rows.slice(from, from + 100).map((r) => r.task_id);
    // Each pass over a small graph gives a task another state than the last one (an UPDATE to the same state
    // is no change, and the feed rightly ignores it).
    const state = states[(b + Math.floor((b * 100) / rows.length)) % states.length];
    await pool.query('UPDATE tasks SET state = $2 WHERE task_id = ANY($1)', [batch, state]);
    const at = Date.now();
    for (const id of batch) committed.set(id, at);
    await new Promise((r) => setTimeout(r, Math.max(0, 100 - (Date.now() - t0))));
  }
  await new Promise((r) => setTimeout(r, 2000));
  const ids = [...committed.keys()];
  const seen = (await page.evaluate(`(() => {
    window.benchStop = true;
    const ids = ${JSON.stringify(ids)};
    return { gaps: window.benchGaps, drawn: ids.map((id) => window.tgsGraph.drawnAt.get(id) ?? null) };
  })()`)) as { gaps: number[]; drawn: (number | null)[] };
  const latencies = ids.flatMap((id, k) => (seen.drawn[k] === null ? [] : [(seen.drawn[k] as number) - (committed.get(id) as number)]));
  const round = (v: number) => Math.round(v);
  return {
    tasks: rows.length,
    changes_per_s: 1000,
    seconds,
    frame_gap_p50_ms: round(percentile(seen.gaps, 50)),
    frame_gap_p95_ms: round(percentile(seen.gaps, 95)),
    frame_gap_max_ms: round(Math.max(...seen.gaps)),
    change_to_drawn_p50_ms: round(percentile(latencies, 50)),
    change_to_drawn_p95_ms: round(percentile(latencies, 95)),
    change_to_drawn_max_ms: round(Math.max(...latencies)),
    changes_not_drawn: seen.drawn.filter((d) => d === null).length,
  };
}

export async function run(stack: BenchStack, sizes: Sizes) {
  const log = stack.log;
  ensureUiBuilt();
  const browser = await chromium.launch(chromiumOptions);
  const results: Record<string, number>[] = [];
  let live: Awaited<ReturnType<typeof liveScenario>> | undefined;
  try {
    for (const tasks of sizes.uiTasks) {
      const { layers, width } = SHAPES[tasks];
      const { graph, edges } = layeredGraph(layers, width, 'ui-bench');
      const taskGraphId = slugid.nice();
      log(`ui: ${tasks}-task graph (${edges} edges): submitting`);
      await stack.root.request('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graph);
      const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
      try {
        const m = await openGraph(page, stack.api.rootUrl, taskGraphId);
        results.push({
          tasks,
          edges,
          fetch_ms: Math.round(m.dataMs),
          layout_ms: Math.round(m.layoutMs),
          first_draw_ms: Math.round(m.firstDraw),
          node_layout_ms: nodeLayoutMs(graph),
        });
        log(`ui: ${tasks} tasks: fetched in ${Math.round(m.dataMs)} ms, laid out in ${Math.round(m.layoutMs)} ms, first frame ${Math.round(m.firstDraw)} ms after opening`);
        if (tasks === sizes.uiLiveTasks) {
          log(`ui: ${tasks} tasks: 1,000 state changes/s for 5 s`);
          live = await liveScenario(stack, page, taskGraphId, 5);
        }
      } finally {
        await page.close();
      }
    }
  } finally {
    await browser.close();
  }
  return { sizes: results, live };
}
