import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { chromium, type Browser, type Page } from 'playwright-core';
import { eventually } from '../../support/stack.js';
import { fastTask, graphOf, layeredGraph } from '../../support/graphs.js';
import { ApiClient } from '../../src/client/http.js';
import { GRAPH_PAGE_MEMO } from '../../src/scheduler/workflowLink.js';
import { workflowIdFor } from '../../src/workflows/contract.js';
import { decodePng } from '../../support/png.js';
import { chromiumOptions, ensureUiBuilt, waitForExpression } from '../../support/uiBuild.js';
import { useStack } from '../helpers/stackFixture.js';

// What a new user reaches for first in the web UI, in headless Chromium without a GPU (WebGL on
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

const taskState = async (taskId: string) => (await stack.root.request('queue', 'GET', `/task/${taskId}/status`)).status.state as string;
const graphState = async (id: string) => (await stack.root.request('scheduler', 'GET', `/task-graph/${id}/status`)).status.state as string;
const signInLink = () => `#signin?clientId=${encodeURIComponent(stack.api.root.clientId)}&accessToken=${encodeURIComponent(stack.api.root.accessToken)}`;

/** Runs one pending task of a worker pool the test drives by hand: its log (as the shell worker writes it), then its outcome. */
async function runByHand(workerType: string, taskId: string, log: string, outcome: 'completed' | 'failed') {
  await eventually(async () => (await taskState(taskId)) === 'pending', `${taskId} pending`);
  // claimWork may answer no task at first (its long poll ends before the task shows): ask until it has it
  let claimed: { status: { taskId: string }; runId: number; credentials: { clientId: string; accessToken: string } } | undefined;
  await eventually(async () => {
    const res = await stack.root.request('queue', 'POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'tests', workerId: 'by-hand', tasks: 1 });
    claimed = res.tasks[0];
    return claimed !== undefined;
  }, `${taskId} claimed`);
  assert.equal(claimed?.status.taskId, taskId);
  if (!claimed) return;
  const api = new ApiClient(stack.api.rootUrl, claimed.credentials);
  const { putUrl } = await api.request('queue', 'POST', `/task/${taskId}/runs/${claimed.runId}/artifacts/public/logs/live.log`, {
    storageType: 's3',
    contentType: 'text/plain; charset=utf-8',
    expires: new Date(Date.now() + 3_600_000).toISOString(),
  });
  assert.equal((await fetch(putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain; charset=utf-8' }, body: log })).status, 200);
  await api.request('queue', 'POST', `/task/${taskId}/runs/${claimed.runId}/${outcome}`);
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

test("the Temporal Web UI links back to the graph page: the workflow's memo and static details carry its URL", async () => {
  const { taskGraphId } = await put({ ...graphOf({ one: {} }), metadata: { name: 'linked' } });
  const url = `${stack.api.rootUrl}/ui/task-graph/${taskGraphId}`;
  const description = await stack.client.workflow.getHandle(workflowIdFor(taskGraphId)).describe();
  assert.equal(description.memo?.[GRAPH_PAGE_MEMO], url);
  assert.equal(await description.staticDetails(), `[Open task-graph ${taskGraphId} in tgs](${url})`);
  // the page it names is the graph's
  const page = await newPage();
  await page.goto(description.memo?.[GRAPH_PAGE_MEMO] as string);
  await page.waitForSelector('h1:has-text("linked")');
  await page.close();
});

test('the task page: Rerun and Cancel (disabled and saying why when signed out), every run with its exit code and its own log, requires and dependents as labelled links, artifacts with where they are stored and their size', async () => {
  const graph = graphOf({ build: {}, test: { requires: ['build'] } });
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = 'by-hand';
  const { taskGraphId, ids } = await put({ ...graph, metadata: { name: 'task page' } });
  const build = ids.get('build') as string;
  const test = ids.get('test') as string;
  const firstLog = 'compiling\nerror: missing semicolon\n[tgs-shell-worker 2026-11-28T16:02:48.000Z] exit code 3 after 0.4 s\n';
  await runByHand('by-hand', build, firstLog, 'failed');
  await eventually(async () => (await graphState(taskGraphId)) === 'blocked', 'graph blocked');

  const page = await newPage();
  await page.goto(`${stack.api.rootUrl}/ui/task/${build}`);
  await page.waitForSelector('.task-page .task-label:has-text("build")');
  // signed out: the actions are there, disabled, and say why
  const rerun = await page.waitForSelector('.task-page .actions button[name=rerun]');
  assert.equal(await rerun.isDisabled(), true);
  assert.match((await rerun.getAttribute('title')) ?? '', /Sign in/);
  assert.equal(await (await page.$('.task-page .actions button[name=cancel-task]'))?.isDisabled(), true);
  assert.match((await page.textContent('.task-page .actions .signin-hint')) ?? '', /Sign in \(top right\) to act/);
  // the exit code beside the run, read from its log
  await page.waitForSelector('table.runs tr[data-run="0"] .exit:has-text("exit 3")');
  // dependents by label, linking to their task page
  const link = await page.waitForSelector(`.task-links .dependents a[href$="/ui/task/${test}"]`);
  assert.equal(await link.textContent(), 'test');
  // the artifact: where it is stored and its size (the log's bytes)
  await page.waitForSelector(`.artifacts li[data-artifact="public/logs/live.log"] .stored:has-text("s3 · tgs's Postgres · ${Buffer.byteLength(firstLog)} B")`);

  // signed in, Rerun works and says so
  await page.goto(`${stack.api.rootUrl}/ui/task/${build}${signInLink()}`);
  await page.waitForSelector(`nav.top .client-id:has-text("${stack.api.root.clientId}")`);
  await page.click('.task-page .actions button[name=rerun]:not([disabled])');
  await page.waitForSelector('.task-page .action-result.ok:has-text("Rerun accepted")');
  await runByHand('by-hand', build, 'all good\n[tgs-shell-worker 2026-11-28T16:03:15.000Z] exit code 0 after 0.2 s\n', 'completed');
  // both runs, each with its exit code; the latest run's log by default, the first one's on demand
  await page.waitForSelector('table.runs tr[data-run="1"] .exit:has-text("exit 0")');
  assert.match((await page.textContent('table.runs tr[data-run="0"] .exit')) ?? '', /exit 3/);
  await waitForExpression(page, `document.querySelector('.task-page .log-tail')?.textContent.includes('all good')`, 15_000);
  await page.click('table.runs button[name=show-run-0]');
  await waitForExpression(page, `document.querySelector('.task-page .log-tail')?.textContent.includes('missing semicolon')`, 15_000);
  assert.match((await page.textContent('.task-page .log-head')) ?? '', /run 0/);

  // the dependent: its requires link back by label; Cancel (confirmed) cancels it
  await page.click(`.task-links .dependents a[href$="/ui/task/${test}"]`);
  await page.waitForURL(new RegExp(`/ui/task/${test}$`));
  const back = await page.waitForSelector(`.task-links .requires a[href$="/ui/task/${build}"]`);
  assert.equal(await back.textContent(), 'build');
  await eventually(async () => (await taskState(test)) === 'pending', 'test pending');
  await page.click('.task-page .actions button[name=cancel-task]:not([disabled])');
  await page.click('.task-page .actions button[name=cancel-task-confirm]');
  await page.waitForSelector('.task-page .action-result.ok:has-text("Task canceled")');
  assert.equal(await taskState(test), 'exception');
  await page.close();
});

test('the graph page: a rerun from the banner is confirmed in the header after the banner goes; signed out, the actions look disabled', async () => {
  const { taskGraphId } = await put({ ...graphOf({ flaky: { outcomes: ['failed', 'completed'] }, after: { requires: ['flaky'] } }), metadata: { name: 'rerun me' } });
  await eventually(async () => (await graphState(taskGraphId)) === 'blocked', 'graph blocked');
  const page = await newPage();
  await page.goto(`${stack.api.rootUrl}/ui/task-graph/${taskGraphId}`);
  const why = await page.waitForSelector('.root-causes button[name=why-rerun]');
  assert.equal(await why.isDisabled(), true, 'signed out: the banner\'s Rerun is disabled');
  assert.match((await why.getAttribute('title')) ?? '', /Sign in/);
  assert.equal(await (await page.$('button[name=cancel-graph]'))?.isDisabled(), true);

  await page.goto(`${stack.api.rootUrl}/ui/task-graph/${taskGraphId}${signInLink()}`);
  await page.waitForSelector(`nav.top .client-id:has-text("${stack.api.root.clientId}")`);
  await page.click('.root-causes button[name=why-rerun]:not([disabled])');
  await eventually(async () => (await graphState(taskGraphId)) === 'finished', 'graph finished');
  await page.waitForSelector('[data-graph-state=finished]');
  assert.match((await page.textContent('.graph-header .action-result.ok')) ?? '', /Rerun of flaky accepted: a new run is scheduled/);
  assert.equal(await page.$('.blocked-note'), null);
  await page.close();
});

test('the list page searches by name or id, owner and duration, and "mine" shows the signed-in client\'s graphs', async () => {
  const me = stack.api.root.clientId;
  const alpha = await put({ ...graphOf({ a: {} }), metadata: { name: 'alpha search', owner: 'ada@example.com' } });
  const beta = await put({ ...graphOf({ b: {} }), metadata: { name: 'beta search', owner: 'me, as I wrote it' } });
  // "mine" is who submitted a graph, not its free-text owner: alpha as another client submitted it
  await stack.api.db.pool.query("UPDATE task_graphs SET submitted_by = 'someone-else' WHERE task_graph_id = $1", [alpha.taskGraphId]);
  assert.equal((await stack.api.db.pool.query('SELECT submitted_by FROM task_graphs WHERE task_graph_id = $1', [beta.taskGraphId])).rows[0].submitted_by, me);
  const page = await newPage();
  const row = (id: string) => `table.graphs tr[data-graph-id="${id}"]`;
  await page.goto(`${stack.api.rootUrl}/ui/${signInLink()}`);
  await page.waitForSelector(row(beta.taskGraphId));
  assert.match((await page.textContent(`${row(alpha.taskGraphId)} .owner`)) ?? '', /ada@example.com/);
  assert.match((await page.textContent(`${row(alpha.taskGraphId)} .took`)) ?? '', /\d/);

  await page.fill('.graph-search input[name=q]', 'ALPHA');
  await page.click('.graph-search button[type=submit]');
  await page.waitForURL(/\?q=ALPHA$/);
  await page.waitForSelector(row(alpha.taskGraphId));
  assert.equal(await page.$(row(beta.taskGraphId)), null);

  // by id, as the address holds it
  await page.goto(`${stack.api.rootUrl}/ui/?q=${beta.taskGraphId}`);
  await page.waitForSelector(row(beta.taskGraphId));
  assert.equal(await page.$(row(alpha.taskGraphId)), null);

  await page.goto(`${stack.api.rootUrl}/ui/?owner=ada@`);
  await page.waitForSelector(row(alpha.taskGraphId));
  assert.equal(await page.$(row(beta.taskGraphId)), null);

  // none of them has run for an hour yet
  await page.goto(`${stack.api.rootUrl}/ui/?minMinutes=60`);
  await page.waitForSelector('.search-note');
  assert.equal(await page.$(row(alpha.taskGraphId)), null);
  assert.equal(await page.$(row(beta.taskGraphId)), null);

  await page.goto(`${stack.api.rootUrl}/ui/`);
  await page.check('.graph-search input[name=mine]');
  await page.waitForURL(/\?mine=1$/);
  await page.waitForSelector(row(beta.taskGraphId));
  assert.equal(await page.$(row(alpha.taskGraphId)), null);
  await page.close();
});

test('the index page browses namespaces down to the tasks indexed in them', async () => {
  const taskId = slugid.nice();
  await stack.root.request('queue', 'PUT', `/task/${taskId}`, { ...fastTask('indexed'), routes: ['index.uitest.demo.latest'] });
  await eventually(async () => (await stack.root.request('index', 'GET', '/task/uitest.demo.latest').catch(() => undefined))?.taskId === taskId, 'the task indexed');
  const page = await newPage();
  // the index's reads are public (the anonymous role's scopes): no need to sign in
  await page.goto(`${stack.api.rootUrl}/ui/index`);
  await page.click('.index-page .namespaces li[data-namespace="uitest"] a');
  await page.waitForURL(/\/ui\/index\/uitest$/);
  await page.click('.index-page .namespaces li[data-namespace="uitest.demo"] a');
  await page.waitForURL(/\/ui\/index\/uitest\.demo$/);
  const entry = await page.waitForSelector('table.indexed tr[data-index-path="uitest.demo.latest"] a');
  assert.equal(await entry.textContent(), taskId);
  await entry.click();
  await page.waitForURL(new RegExp(`/ui/task/${taskId}$`));
  await page.close();
});

test('a running graph waiting on a worker pool nobody serves says so in its header', async () => {
  const graph = graphOf({ lonely: {} });
  (graph.tasks.lonely.task as { workerType: string }).workerType = 'shel';
  const { taskGraphId, ids } = await put({ ...graph, metadata: { name: 'typo in workerType' } });
  await eventually(async () => (await taskState(ids.get('lonely') as string)) === 'pending', 'lonely pending');
  const page = await newPage();
  await page.goto(`${stack.api.rootUrl}/ui/task-graph/${taskGraphId}`);
  await page.waitForSelector('[data-graph-state=running]');
  const cause = await page.waitForSelector('.root-causes.waiting li[data-kind="no-workers"]', { timeout: 30_000 });
  assert.match((await cause.textContent()) ?? '', /Waiting: 1 task: no-workers tgs-test\/shel — start a worker for tgs-test\/shel/);
  await page.close();
});
