/**
 * `npm run screenshots`: pictures of the graph explorer for docs/ and the README, taken from a real stack
 * (Postgres, RabbitMQ, a Temporal dev server, the scheduler worker) in headless Chromium:
 *   docs/ui-graph.png      a small graph with every task state, blocked, a running task's panel with its live log
 *   docs/ui-graph-30k.png  a 30,000-task graph (116,000 edges) while workers run through it
 *   docs/ui-list.png       the graphs list
 *   docs/ui-task.png       a task's page
 *   docs/ui-graph-300.png  a 300-task graph (10 layers of 30, fan-in 4) at the Fit zoom, edges and all
 *   docs/ui-hooks.png      the hooks page: a scheduled hook, a paused one, one whose fire was refused
 *   docs/ui-index.png      the index browser in a namespace with tasks indexed in it
 *   docs/ui-amend.png      Amend on a finished graph: its file edited, the dry run's classes
 *   docs/ui-amended.png    the same graph once amended: changed, dependent, added and replaced nodes ringed
 * `npm run screenshots -- amend hooks` takes only those (the names of the functions below, without `Graph`/`Page`).
 */
import { mkdirSync } from 'node:fs';
import slugid from 'slugid';
import { chromium, type Page } from 'playwright-core';
import { startStack, eventually, type Stack } from '../support/stack.js';
import { startFastWorker } from '../support/fastWorker.js';
import { fastTask, graphOf, layeredGraph } from '../support/graphs.js';
import { ApiClient } from '../src/client/http.js';
import { chromiumOptions, ensureUiBuilt, waitForExpression } from '../support/uiBuild.js';

const log = (line: string) => console.error(`[screenshots] ${line}`);
const viewport = { width: 1400, height: 900 };

async function submit(stack: Stack, graph: ReturnType<typeof graphOf>, name: string) {
  const taskGraphId = slugid.nice();
  const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, {
    ...graph,
    metadata: { name, description: 'screenshot', owner: 'docs@example.com', source: 'https://example.com/tgs' },
  });
  return { taskGraphId, ids: new Map(res.tasks.map((t) => [t.label, t.taskId])) };
}

const state = async (stack: Stack, taskId: string) => (await stack.root.request('queue', 'GET', `/task/${taskId}/status`)).status.state as string;

async function openGraph(page: Page, stack: Stack, taskGraphId: string) {
  await page.goto(`${stack.api.rootUrl}/ui/task-graph/${taskGraphId}`);
  await waitForExpression(page, 'window.tgsGraph && window.tgsGraph.metrics.firstDraw !== undefined', 120_000);
}

/** A release pipeline with one task in each state; `unit-tests` is running with a live log. */
async function smallGraph(stack: Stack, page: Page) {
  const graph = graphOf({
    checkout: {},
    build: { requires: ['checkout'] },
    'unit-tests': { requires: ['build'] },
    lint: { requires: ['build'], outcomes: ['failed'] },
    docs: { requires: ['build'], outcomes: ['exception'] },
    integration: { requires: ['build'] },
    package: { requires: ['unit-tests', 'lint', 'integration'] },
    publish: { requires: ['package'] },
    announce: { requires: ['publish', 'docs'] },
  }, 'release');
  (graph.tasks['unit-tests'].task as { workerType: string }).workerType = 'held';
  (graph.tasks.integration.task as { workerType: string }).workerType = 'nobody';
  const { taskGraphId, ids } = await submit(stack, graph, 'release 1.4.2');
  const unitTests = ids.get('unit-tests') as string;
  await eventually(async () => (await state(stack, unitTests)) === 'pending', 'unit-tests pending', 60_000);
  const claim = await stack.root.request('queue', 'POST', '/claim-work/tgs-test/held', { workerGroup: 'docs', workerId: 'runner-1', tasks: 1 });
  const run = new ApiClient(stack.api.rootUrl, claim.tasks[0].credentials);
  const { putUrl } = await run.request('queue', 'POST', `/task/${unitTests}/runs/0/artifacts/public/logs/live.log`, {
    storageType: 's3',
    contentType: 'text/plain; charset=utf-8',
    expires: new Date(Date.now() + 86_400_000).toISOString(),
  });
  const lines = ['$ npm test', '', '> app@1.4.2 test', '> node --test', ''];
  for (let i = 1; i <= 24; i++) lines.push(`✔ suite ${i}: ${['parses input', 'handles empty files', 'retries on timeout', 'keeps order'][i % 4]} (${(i * 37) % 400} ms)`);
  lines.push('▶ suite 25: streams large payloads');
  await fetch(putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain; charset=utf-8' }, body: `${lines.join('\n')}\n` });
  await eventually(async () => (await stack.root.request('scheduler', 'GET', `/task-graph/${taskGraphId}/status`)).status.state === 'blocked', 'blocked', 60_000);
  await eventually(async () => (await state(stack, ids.get('docs') as string)) === 'exception', 'docs exception', 60_000);
  await openGraph(page, stack, taskGraphId);
  await page.fill('.search input[name=search]', 'unit-tests');
  await page.press('.search input[name=search]', 'Enter');
  await page.waitForSelector('.task-panel .log-tail');
  await page.evaluate('window.tgsGraph.fit()');
  await page.waitForTimeout(500);
  await page.screenshot({ path: 'docs/ui-graph.png' });
  log('docs/ui-graph.png');
  await page.goto(`${stack.api.rootUrl}/ui/task/${ids.get('lint')}`);
  await page.waitForSelector('table.runs');
  await page.waitForTimeout(300);
  await page.screenshot({ path: 'docs/ui-task.png' });
  log('docs/ui-task.png');
  return taskGraphId;
}

async function bigGraph(stack: Stack, page: Page) {
  const { graph } = layeredGraph(30, 1000, 'big');
  // a few tasks fail for good, so the picture shows a blocked graph with what it holds back
  for (const label of ['l2-17', 'l3-640']) graph.tasks[label].task.payload.outcomes = ['failed'];
  log('submitting a 30,000-task graph');
  const { taskGraphId } = await submit(stack, graph, 'nightly: 30,000 tasks');
  const worker = startFastWorker({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'big', concurrency: 8, batch: 8 });
  try {
    await eventually(async () => worker.reported.length >= 4000, '4,000 tasks done', 300_000);
    await openGraph(page, stack, taskGraphId);
    await page.waitForTimeout(1500);
    await page.screenshot({ path: 'docs/ui-graph-30k.png' });
    log('docs/ui-graph-30k.png');
  } finally {
    await worker.stop();
  }
}

/** A 300-task graph at the Fit zoom: every edge visible on a software renderer (docs/ui.md § How it stays fast at 30,000 tasks) */
async function fitGraph(stack: Stack, page: Page) {
  const { graph } = layeredGraph(10, 30, 'nobody');
  const { taskGraphId } = await submit(stack, graph, 'big-300');
  await openGraph(page, stack, taskGraphId);
  await page.click('.toolbar button:has-text("Fit")');
  await page.waitForTimeout(500);
  await page.screenshot({ path: 'docs/ui-graph-300.png' });
  log('docs/ui-graph-300.png');
}

const signIn = (stack: Stack) => `#signin?clientId=${encodeURIComponent(stack.api.root.clientId)}&accessToken=${encodeURIComponent(stack.api.root.accessToken)}`;

async function hooksPage(stack: Stack, page: Page) {
  const put = (id: string, body: object) => stack.root.request('hooks', 'PUT', `/hooks/docs/${id}`, body);
  await stack.root.request('auth', 'PUT', `/roles/${encodeURIComponent('hook-id:docs/nightly')}`, { description: 'docs', scopes: ['queue:create-task:lowest:tgs-test/fast', 'queue:scheduler-id:-'] });
  const task = { ...fastTask('nightly'), created: '${now}', deadline: { $fromNow: '1 hour' } };
  await put('nightly', { metadata: { name: 'nightly build', description: 'docs', owner: 'docs@example.com' }, schedule: ['0 0 2 * * *'], task });
  await stack.root.request('hooks', 'POST', '/hooks/docs/nightly/trigger', {});
  await put('weekly', { metadata: { name: 'weekly report (paused)', description: 'docs', owner: 'docs@example.com' }, schedule: ['0 0 6 * * 1'], task });
  await stack.root.request('hooks', 'POST', '/hooks/docs/weekly/pause');
  await put('no-role', { metadata: { name: 'hook without a role', description: 'docs', owner: 'docs@example.com' }, task: fastTask('no-role') });
  await stack.root.request('hooks', 'POST', '/hooks/docs/no-role/trigger', {}).catch(() => undefined);
  await page.goto(`${stack.api.rootUrl}/ui/hooks${signIn(stack)}`);
  await page.waitForSelector('table.hooks tr[data-hook="docs/no-role"] .fire-error');
  await page.waitForTimeout(300);
  await page.screenshot({ path: 'docs/ui-hooks.png' });
  log('docs/ui-hooks.png');
}

async function indexPage(stack: Stack, page: Page) {
  for (const [name, rank] of [['latest', 3], ['1-4-2', 3], ['1-4-1', 2]] as const) {
    await stack.root.request('queue', 'PUT', `/task/${slugid.nice()}`, { ...fastTask(`release ${name}`), routes: [`index.project.app.release.${name}`], extra: { index: { rank } } });
  }
  await eventually(async () => (await stack.root.request('index', 'GET', '/tasks/project.app.release').catch(() => ({ tasks: [] }))).tasks.length === 3, 'three tasks indexed', 60_000);
  await page.goto(`${stack.api.rootUrl}/ui/index/project.app.release`);
  await page.waitForSelector('table.indexed tbody tr');
  await page.waitForTimeout(300);
  await page.screenshot({ path: 'docs/ui-index.png' });
  log('docs/ui-index.png');
}

/** A release pipeline amended from the page: build's command edited, a label added, one removed, one re-prioritised. */
async function amendGraph(stack: Stack, page: Page) {
  const graph = graphOf({
    checkout: {},
    build: { requires: ['checkout'], payload: { command: 'make all' } },
    'unit-tests': { requires: ['build'] },
    lint: { requires: ['checkout'] },
    docs: { requires: ['checkout'] },
    package: { requires: ['unit-tests', 'lint'] },
    publish: { requires: ['package'] },
  }, 'release');
  const { taskGraphId } = await submit(stack, graph, 'release 1.4.3');
  await eventually(async () => (await stack.root.request('scheduler', 'GET', `/task-graph/${taskGraphId}/status`)).status.state === 'finished', 'finished', 60_000);
  await page.goto(`${stack.api.rootUrl}/ui/task-graph/${taskGraphId}${signIn(stack)}`);
  await waitForExpression(page, 'window.tgsGraph && window.tgsGraph.metrics.firstDraw !== undefined', 120_000);
  await page.click('button[name=amend-graph]');
  await waitForExpression(page, `document.querySelector('textarea[name=amend-file]')?.value.includes('"publish"')`, 30_000);
  const file = JSON.parse(await page.inputValue('textarea[name=amend-file]')) as { tasks: Record<string, { requires?: string[]; task: Record<string, unknown> }> };
  (file.tasks.build.task.payload as Record<string, unknown>).command = 'make all -j8';
  file.tasks.lint.task.priority = 'high';
  delete file.tasks.docs;
  file.tasks.sbom = { requires: ['build'], task: fastTask('sbom') };
  await page.fill('textarea[name=amend-file]', JSON.stringify(file, null, 2));
  await page.evaluate(`document.querySelector('textarea[name=amend-file]').scrollTop = 0`);
  await page.click('button[name=amend-dry-run]');
  await page.waitForSelector('.amend-classification');
  await page.evaluate(`document.querySelector('.amend-panel').scrollIntoView()`);
  await page.waitForTimeout(300);
  await page.screenshot({ path: 'docs/ui-amend.png' });
  log('docs/ui-amend.png');
  await page.click('button[name=amend-apply]');
  await page.waitForSelector('.table-body .row[data-label=build][data-amend=changed]', { timeout: 60_000 });
  await eventually(async () => (await stack.root.request('scheduler', 'GET', `/task-graph/${taskGraphId}/status`)).status.state === 'finished', 'finished again', 60_000);
  await page.evaluate('window.scrollTo(0, 0)');
  await page.click('.toolbar button:has-text("Fit")');
  // the dependents' marks once they resolved: rerun (dependent) or kept by the early cutoff
  await page.waitForTimeout(3000);
  await page.screenshot({ path: 'docs/ui-amended.png' });
  log('docs/ui-amended.png');
}

/** The shots named on the command line (all when none is). */
const only = process.argv.slice(2);
const wanted = (name: string) => only.length === 0 || only.includes(name);

async function main() {
  ensureUiBuilt();
  mkdirSync('docs', { recursive: true });
  const stack = await startStack();
  const browser = await chromium.launch(chromiumOptions);
  const worker = startFastWorker({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'fast', concurrency: 4 });
  try {
    const page = await browser.newPage({ viewport });
    await submit(stack, graphOf({ a: {}, b: { requires: ['a'] }, c: { requires: ['a'] }, d: { requires: ['b', 'c'] } }), 'docs site');
    if (wanted('small')) await smallGraph(stack, page);
    if (wanted('fit')) await fitGraph(stack, page);
    if (wanted('hooks')) await hooksPage(stack, page);
    if (wanted('index')) await indexPage(stack, page);
    if (wanted('amend')) await amendGraph(stack, page);
    if (wanted('big')) await bigGraph(stack, page);
    if (wanted('list')) {
      await page.goto(`${stack.api.rootUrl}/ui/`);
      await page.waitForSelector('table.graphs tbody tr');
      await page.waitForTimeout(300);
      await page.screenshot({ path: 'docs/ui-list.png' });
      log('docs/ui-list.png');
    }
  } finally {
    await worker.stop();
    await browser.close();
    stack.api.api.app.server.closeAllConnections();
    await stack.stop();
  }
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error('screenshots failed:', err);
    process.exit(1);
  },
);
