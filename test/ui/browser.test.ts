import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { chromium, type Browser, type Page } from 'playwright-core';
import { stringify as stringifyYaml } from 'yaml';
import { eventually } from '../../support/stack.js';
import type { ClaimedTask } from '../../support/fastWorker.js';
import { fastTask, graphOf } from '../../support/graphs.js';
import { ApiClient } from '../../src/client/http.js';
import { chromiumOptions, ensureUiBuilt, waitForExpression } from '../../support/uiBuild.js';
import { useStack } from '../helpers/stackFixture.js';

// The graph explorer in headless Chromium against the real stack (API, relay, bridge, Temporal, worker).
// Page functions are strings: tsx would wrap named functions in a helper the page does not have. Waits poll
// page.evaluate (waitForExpression): the UI's CSP forbids the eval that waitForFunction runs in the page.

let browser: Browser;
/** Tasks whose next run the fast worker completes (others fail when their payload says `broken`). */
const fixed = new Set<string>();
/** Anything the UI's Content-Security-Policy blocked on any page (the UI must work under it). */
const cspViolations: string[] = [];

const stack = useStack({
  beforeStart: ensureUiBuilt,
  worker: { concurrency: 4, decide: (task: ClaimedTask) => (task.task.payload.broken && !fixed.has(task.taskId) ? 'failed' : 'completed') },
});
stack.onStart(async () => {
  browser = await chromium.launch(chromiumOptions);
});
stack.onStop(async () => {
  assert.deepEqual(cspViolations, [], 'the UI ran into its Content-Security-Policy');
  await browser?.close();
});

type Nodes = Parameters<typeof graphOf>[0];

async function submit(nodes: Nodes, workerType = 'fast', workerTypes: Record<string, string> = {}) {
  const graph = { ...graphOf(nodes), metadata: { name: `ui test on ${workerType}` } };
  for (const [label, node] of Object.entries(graph.tasks)) (node.task as { workerType: string }).workerType = workerTypes[label] ?? workerType;
  const taskGraphId = slugid.nice();
  const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graph);
  return { taskGraphId, ids: new Map(res.tasks.map((t) => [t.label, t.taskId])) };
}

const graphState = async (id: string) => (await stack.root.request('scheduler', 'GET', `/task-graph/${id}/status`)).status.state as string;
const waitGraphState = (id: string, state: string) => eventually(async () => (await graphState(id)) === state, `graph ${id} ${state}`, 60_000);
const taskState = async (taskId: string) => (await stack.root.request('queue', 'GET', `/task/${taskId}/status`)).status.state as string;

interface Claimed {
  taskId: string;
  runId: number;
  api: ApiClient;
}

/** Claims the one pending task of a worker pool the test drives by hand. */
async function claim(workerType: string, taskId: string): Promise<Claimed> {
  const res = await stack.root.request('queue', 'POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'tests', workerId: 'browser', tasks: 1 });
  const task = res.tasks[0];
  assert.equal(task?.status.taskId, taskId, `claimed ${taskId} from ${workerType}`);
  return { taskId, runId: task.runId, api: new ApiClient(stack.api.rootUrl, task.credentials) };
}

async function report(c: Claimed, outcome: 'completed' | 'failed') {
  await c.api.request('queue', 'POST', `/task/${c.taskId}/runs/${c.runId}/${outcome}`);
}

/** Uploads the run's public/logs/live.log (again), as a worker does while the task runs. */
async function uploadLog(c: Claimed, text: string) {
  const { putUrl } = await c.api.request('queue', 'POST', `/task/${c.taskId}/runs/${c.runId}/artifacts/public/logs/live.log`, {
    storageType: 's3',
    contentType: 'text/plain; charset=utf-8',
    expires: new Date(Date.now() + 3_600_000).toISOString(),
  });
  const res = await fetch(putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain; charset=utf-8' }, body: text });
  assert.equal(res.status, 200, `log upload: ${await res.text()}`);
}

async function newPage(): Promise<Page> {
  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('pageerror', (err) => console.error(`page error: ${err.message}`));
  page.on('console', (m) => /Content Security Policy/i.test(m.text()) && cspViolations.push(m.text()));
  return page;
}

async function openGraph(page: Page, taskGraphId: string) {
  await page.goto(`${stack.api.rootUrl}/ui/task-graph/${taskGraphId}`);
  await waitForExpression(page, 'window.tgsGraph && window.tgsGraph.metrics.firstDraw !== undefined', 30_000);
}

/** The header's counts by state, as the page's text shows them. */
async function counts(page: Page): Promise<Record<string, number>> {
  const entries = await page.$$eval('.summary [data-count]', (els) => els.map((el) => [el.getAttribute('data-count'), el.querySelector('b')?.textContent]));
  return Object.fromEntries(entries.map(([k, v]) => [k as string, Number(v)]));
}

/** Waits until the header shows these counts (others zero) and the graph this state. */
async function expectCounts(page: Page, expected: Record<string, number>, state?: string) {
  const want = { unscheduled: 0, pending: 0, running: 0, completed: 0, failed: 0, exception: 0, ...expected };
  let last: unknown;
  await eventually(async () => {
    last = { counts: await counts(page), state: await page.getAttribute('[data-graph-state]', 'data-graph-state') };
    const c = (last as { counts: Record<string, number> }).counts;
    return Object.entries(want).every(([k, v]) => c[k] === v) && (!state || (last as { state: string }).state === state);
  }, `the page to show ${JSON.stringify(want)}${state ? ` and ${state}` : ''} (last seen ${JSON.stringify(last)})`, 30_000).catch((err: Error) => {
    throw new Error(`${err.message}; last seen ${JSON.stringify(last)}`);
  });
}

/** Clicks a node in the drawing (where the renderer put it). */
async function clickNode(page: Page, label: string) {
  const at = await page.evaluate(`(() => {
    const store = window.tgsGraph;
    const idx = store.find(${JSON.stringify(label)});
    const p = store.screenPosition(idx);
    const r = document.querySelector('.graph-overlay').getBoundingClientRect();
    return { x: p.x + r.left, y: p.y + r.top };
  })()`) as { x: number; y: number };
  await page.mouse.click(at.x, at.y);
  await waitForExpression(page, `document.querySelector('.task-panel .task-label')?.textContent === ${JSON.stringify(label)}`, 10_000);
}

async function signInWithForm(page: Page, clientId: string, accessToken: string) {
  await page.click('nav.top button:has-text("Sign in")');
  await page.fill('.signin-form input[name=clientId]', clientId);
  await page.fill('.signin-form input[name=accessToken]', accessToken);
  await page.click('.signin-form button[type=submit]');
}

test('a small graph shows the right states and updates live as tasks resolve and as it is extended, without reloading the graph', async () => {
  const { taskGraphId, ids } = await submit({ fetch: {}, build: { requires: ['fetch'] }, test: { requires: ['build'] } }, 'live');
  await eventually(async () => (await taskState(ids.get('fetch') as string)) === 'pending', 'fetch pending');
  const page = await newPage();
  const nodeRequests: string[] = [];
  const apiRequests: string[] = [];
  page.on('request', (r) => {
    if (r.url().includes('/nodes')) nodeRequests.push(r.url());
    if (r.url().includes('/api/')) apiRequests.push(new URL(r.url()).pathname);
  });
  await openGraph(page, taskGraphId);
  await expectCounts(page, { pending: 1, unscheduled: 2 }, 'running');
  // the header's name and age come with the nodes answer: the page asks for nothing else before its first frame
  // (the info endpoint counts every task by state, seconds of Postgres at 100,000 tasks, for a header that has them)
  assert.equal(await page.textContent('.graph-header h1'), 'ui test on live');
  assert.match((await page.textContent('.graph-header .title')) ?? '', /created \d+ s ago/);
  assert.deepEqual(apiRequests.filter((p) => !p.endsWith('/nodes') && !p.endsWith('/changes')), [], 'requests beside the nodes and the changes feed');
  assert.equal(await page.textContent('[data-total-tasks]'), '3');
  assert.equal(await page.getAttribute('.table-body .row[data-label=fetch]', 'data-state'), 'pending');

  const fetchRun = await claim('live', ids.get('fetch') as string);
  await expectCounts(page, { running: 1, unscheduled: 2 });
  await page.waitForSelector('.table-body .row[data-label=fetch][data-state=running]');
  await report(fetchRun, 'completed');
  await expectCounts(page, { completed: 1, pending: 1, unscheduled: 1 });
  const buildRun = await claim('live', ids.get('build') as string);
  await report(buildRun, 'completed');
  await expectCounts(page, { completed: 2, pending: 1 });
  // extended while the page is open: the new task appears, laid out with the others
  const extension = graphOf({ deploy: { requires: ['test'] } });
  (extension.tasks.deploy.task as { workerType: string }).workerType = 'live';
  const extended = await stack.root.request('scheduler', 'POST', `/task-graph/${taskGraphId}/extend`, { tasks: extension.tasks });
  await waitForExpression(page, `document.querySelector('[data-total-tasks]')?.textContent === '4'`, 30_000);
  await expectCounts(page, { completed: 2, pending: 1, unscheduled: 1 });
  await page.waitForSelector('.table-body .row[data-label=deploy][data-state=unscheduled]');
  const testRun = await claim('live', ids.get('test') as string);
  await report(testRun, 'completed');
  const deployRun = await claim('live', extended.tasks[0].taskId as string);
  await report(deployRun, 'completed');
  await expectCounts(page, { completed: 4 }, 'finished');
  assert.equal(await page.getAttribute('.table-body .row[data-label=test]', 'data-state'), 'completed');
  // the changes feed carries the header too: the name stays after its answers
  assert.equal(await page.textContent('.graph-header h1'), 'ui test on live');
  // the drawing holds the same states as the text, and the new task sits below the one it requires
  assert.equal(await page.evaluate('Array.from(window.tgsGraph.data.states).join()'), '3,3,3,3');
  assert.ok((await page.evaluate('window.tgsGraph.data.xy[7] > window.tgsGraph.data.xy[5]')) as boolean);
  assert.deepEqual(nodeRequests.map((u) => new URL(u).search), ['', '?fromIdx=3'], 'the graph was fetched once, then only the new task');
  await page.close();
});

test('clicking a failed task shows its log tail; the tail follows while a task runs', async () => {
  const { taskGraphId, ids } = await submit({ compile: {}, ship: { requires: ['compile'] }, lint: {} }, 'logs', { lint: 'lint' });
  await eventually(async () => (await taskState(ids.get('compile') as string)) === 'pending', 'compile pending');
  const compile = await claim('logs', ids.get('compile') as string);
  const log = Array.from({ length: 300 }, (_, i) => `compiling unit ${i}`).concat('error: the build broke at line 42').join('\n');
  await uploadLog(compile, `${log}\n`);
  await report(compile, 'failed');
  await eventually(async () => (await taskState(ids.get('lint') as string)) === 'pending', 'lint pending');
  const lint = await claim('lint', ids.get('lint') as string);
  await uploadLog(lint, 'lint step 1\n');
  await waitGraphState(taskGraphId, 'blocked');

  const page = await newPage();
  await openGraph(page, taskGraphId);
  await expectCounts(page, { failed: 1, running: 1, unscheduled: 1 }, 'blocked');
  // the blocking task stands out and what it holds back is counted
  assert.match((await page.textContent('.blocked-note')) ?? '', /Blocked by compile \(failed\) — holding back 1 task/);
  // the banner names the root cause, and the waiting task says why it waits, each with a Rerun button
  await page.waitForSelector('.root-causes li[data-kind="dependency-failed"] button[name=why-rerun]');
  assert.match((await page.textContent('.root-causes')) ?? '', /1 task: dependency-failed compile — rerun compile/);
  await clickNode(page, 'ship');
  await page.waitForSelector('.task-panel .why .blockers li[data-kind="dependency-failed"]');
  assert.match((await page.textContent('.task-panel .why')) ?? '', /compile \(failed\) — rerun compileRerun compile/);
  await clickNode(page, 'compile');
  await waitForExpression(page, `document.querySelector('.task-panel .log-tail')?.textContent.includes('error: the build broke at line 42')`, 15_000);
  const tail = (await page.textContent('.task-panel .log-tail')) ?? '';
  assert.doesNotMatch(tail, /compiling unit 0\n/, 'only the tail of a long log');
  assert.equal(await page.textContent('.task-panel .task-state .badge'), 'failed');
  assert.match((await page.textContent('.task-panel table.runs')) ?? '', /scheduled → failed/);
  assert.match((await page.textContent('.task-panel .dependents')) ?? '', /ship/);
  assert.match((await page.textContent('.task-panel .artifacts')) ?? '', /public\/logs\/live\.log/);

  // a running task: its log grows while the panel is open
  await clickNode(page, 'lint');
  await waitForExpression(page, `document.querySelector('.task-panel .log-tail')?.textContent.includes('lint step 1')`, 15_000);
  await uploadLog(lint, 'lint step 1\nlint step 2: all clean\n');
  await waitForExpression(page, `document.querySelector('.task-panel .log-tail')?.textContent.includes('lint step 2: all clean')`, 15_000);
  await report(lint, 'completed');
  await waitForExpression(page, `document.querySelector('.task-panel .task-state .badge')?.textContent === 'completed'`, 15_000);
  await page.close();
});

test('Rerun from the page, signed with Hawk, turns a blocked graph into a finished one', async () => {
  const { taskGraphId, ids } = await submit({ flaky: { payload: { broken: true } }, deploy: { requires: ['flaky'] } });
  await waitGraphState(taskGraphId, 'blocked');
  const page = await newPage();
  const signed: string[] = [];
  page.on('request', (r) => r.method() === 'POST' && r.url().includes('/rerun/') && signed.push(r.headers().authorization ?? ''));
  await openGraph(page, taskGraphId);
  await expectCounts(page, { failed: 1, unscheduled: 1 }, 'blocked');
  await signInWithForm(page, stack.api.root.clientId, stack.api.root.accessToken);
  await page.waitForSelector(`nav.top .client-id:has-text("${stack.api.root.clientId}")`);
  // the search box centres and selects the node
  await page.fill('.search input[name=search]', 'flaky');
  await page.press('.search input[name=search]', 'Enter');
  await page.waitForSelector('.task-panel .task-label:has-text("flaky")');
  fixed.add(ids.get('flaky') as string);
  await page.click('.task-panel button[name=rerun]');
  await page.waitForSelector('.task-panel .action-result.ok:has-text("Rerun accepted")');
  await expectCounts(page, { completed: 2 }, 'finished');
  assert.equal(signed.length, 1);
  assert.match(signed[0], /^Hawk id="static\/tgs\/root", ts="\d+", nonce="[^"]+", hash="[^"]+", mac="[^"]+"$/);
  // the credentials stay in this tab's sessionStorage, never in the address
  assert.doesNotMatch(page.url(), /accessToken/);
  assert.match((await page.evaluate('sessionStorage.getItem("tgs-credentials")')) as string, /static\/tgs\/root/);
  await page.close();
});

test('a wrong credential shows a clear error; a refused action names the missing scope', async () => {
  const page = await newPage();
  await page.goto(`${stack.api.rootUrl}/ui/`);
  await signInWithForm(page, stack.api.root.clientId, 'not-the-token');
  const error = (await page.waitForSelector('.signin-form .error[role=alert]')).textContent();
  assert.match((await error) ?? '', /Sign-in failed\. Your credentials were not accepted \(401 AuthenticationFailed\)/);
  assert.equal(await page.evaluate('sessionStorage.getItem("tgs-credentials")'), null, 'refused credentials are not kept');

  // a sign-in link with a wrong token says so too
  await page.goto(`${stack.api.rootUrl}/ui/#signin?clientId=${encodeURIComponent(stack.api.root.clientId)}&accessToken=wrong`);
  await page.waitForSelector('nav.top .error:has-text("The sign-in link was refused")');
  assert.ok(!page.url().includes('#signin'), 'the credentials leave the address bar');

  // a client without the scope: signed in through the link, the cancel is refused with the scope it lacks
  const clientId = `tests/ui-${slugid.nice()}`;
  const created = await stack.root.request('auth', 'PUT', `/clients/${encodeURIComponent(clientId)}`, {
    description: 'browser test: no scheduler scopes',
    expires: new Date(Date.now() + 3_600_000).toISOString(),
    scopes: ['auth:current-scopes'],
  });
  const { taskGraphId } = await submit({ waiting: {} }, 'nobody');
  await page.goto(`${stack.api.rootUrl}/ui/task-graph/${taskGraphId}#signin?clientId=${encodeURIComponent(clientId)}&accessToken=${created.accessToken}`);
  await page.waitForSelector(`nav.top .client-id:has-text("${clientId}")`);
  assert.ok(!page.url().includes('accessToken'));
  await page.click('button[name=cancel-graph]');
  await page.click('button[name=cancel-graph-confirm]');
  const refused = await page.waitForSelector('.graph-header .action-result.error');
  const text = (await refused.textContent()) ?? '';
  assert.match(text, /403 InsufficientScopes/);
  assert.match(text, new RegExp(`Missing scope: scheduler:cancel-task-graph:${taskGraphId}`));
  assert.equal(await graphState(taskGraphId), 'running', 'nothing was canceled');
  await page.close();
});

test('the graphs list shows each graph with its counts and filters by state', async () => {
  const finished = await submit({ one: {}, two: { requires: ['one'] } });
  const blocked = await submit({ bad: { payload: { broken: true } }, later: { requires: ['bad'] } });
  const running = await submit({ idle: {} }, 'nobody');
  await waitGraphState(finished.taskGraphId, 'finished');
  await waitGraphState(blocked.taskGraphId, 'blocked');
  await eventually(async () => (await taskState(running.ids.get('idle') as string)) === 'pending', 'idle pending');
  const page = await newPage();
  await page.goto(`${stack.api.rootUrl}/ui/`);
  const row = (id: string) => `table.graphs tr[data-graph-id="${id}"]`;
  await page.waitForSelector(row(running.taskGraphId));
  assert.equal(await page.getAttribute(row(blocked.taskGraphId), 'data-state'), 'blocked');
  assert.match((await page.textContent(`${row(blocked.taskGraphId)} .by-state`)) ?? '', /1 unscheduled.*1 failed/);
  assert.match((await page.textContent(`${row(finished.taskGraphId)} .by-state`)) ?? '', /2 completed/);

  const shownStates = () => page.$$eval('table.graphs tbody tr', (rows) => rows.map((r) => r.getAttribute('data-state')));
  await page.selectOption('select[name=graph-state]', 'blocked');
  await page.waitForURL(/\?state=blocked$/);
  await waitForExpression(page, `Array.from(document.querySelectorAll('table.graphs tbody tr')).every((r) => r.dataset.state === 'blocked')`);
  await page.waitForSelector(row(blocked.taskGraphId));
  assert.equal(await page.$(row(finished.taskGraphId)), null);
  assert.ok((await shownStates()).every((s) => s === 'blocked'));

  await page.selectOption('select[name=graph-state]', 'finished');
  await page.waitForSelector(row(finished.taskGraphId));
  assert.ok((await shownStates()).every((s) => s === 'finished'));
  assert.equal(await page.$(row(blocked.taskGraphId)), null);

  // the filter is in the address: opening it directly shows the same
  await page.goto(`${stack.api.rootUrl}/ui/?state=running`);
  await page.waitForSelector(row(running.taskGraphId));
  assert.ok((await shownStates()).every((s) => s === 'running'));
  // and a graph's row leads to its page
  await page.click(`${row(running.taskGraphId)} a`);
  await page.waitForURL(new RegExp(`/ui/task-graph/${running.taskGraphId}$`));
  await page.waitForSelector('[data-graph-state=running]');
  await page.close();
});

test('a node reused from the cache is marked in the drawing and the table as the change arrives, and its panel links to the source', async () => {
  // gate (refresh: always runs, driven by hand) → tool (use): the second graph's tool is reused once gate completes
  const graph = () => ({
    metadata: { name: 'ui cache' },
    tasks: {
      gate: { cache: { name: 'ui-gate', mode: 'refresh' }, task: { ...fastTask('gate'), workerType: 'ui-gate' } },
      tool: { requires: ['gate'], cache: { name: 'ui-tool' }, task: fastTask('tool') },
    },
  });
  const put = async () => {
    const taskGraphId = slugid.nice();
    const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graph());
    return { taskGraphId, ids: new Map(res.tasks.map((t) => [t.label, t.taskId])) };
  };
  const runGate = async (ids: Map<string, string>) => {
    const gate = ids.get('gate') as string;
    await eventually(async () => (await taskState(gate)) === 'pending', 'gate pending');
    await report(await claim('ui-gate', gate), 'completed');
  };
  const first = await put();
  await runGate(first.ids);
  await waitGraphState(first.taskGraphId, 'finished');
  await eventually(async () => (await stack.root.request('scheduler', 'GET', '/cache/default/ui-tool')).entries.length > 0, 'the tool entry indexed');

  const second = await put();
  const page = await newPage();
  await openGraph(page, second.taskGraphId);
  const cachedFlag = (label: string) => page.evaluate(`(window.tgsGraph.flags[window.tgsGraph.find(${JSON.stringify(label)})] & 16) !== 0`);
  assert.equal(await cachedFlag('tool'), false, 'not reused before it is ready');
  await runGate(second.ids);
  await waitGraphState(second.taskGraphId, 'finished');
  await eventually(async () => (await cachedFlag('tool')) === true, 'the drawing marks the reused node');
  assert.equal(await cachedFlag('gate'), false, 'a node that ran is not marked');
  await page.waitForSelector('.task-table .row[data-label="tool"][data-cached="1"]');
  await clickNode(page, 'tool');
  const link = await page.waitForSelector(`.task-panel .cached a[href$="task/${first.ids.get('tool')}"]`);
  assert.equal(await link.textContent(), first.ids.get('tool'));
  // loaded afresh, the mark comes with the nodes
  await page.reload();
  await waitForExpression(page, 'window.tgsGraph && window.tgsGraph.metrics.firstDraw !== undefined', 30_000);
  assert.equal(await cachedFlag('tool'), true);
  await page.close();
});

test('Amend from the page: the graph\'s file in the editor, a command edited, the dry run says what reruns, Apply marks the new node and the one it replaced', async () => {
  const { taskGraphId, ids } = await submit({ compile: { payload: { step: 'make' } }, package: { requires: ['compile'] }, docs: {} });
  await waitGraphState(taskGraphId, 'finished');
  const page = await newPage();
  await openGraph(page, taskGraphId);
  await expectCounts(page, { completed: 3 }, 'finished');
  assert.equal(await page.getAttribute('button[name=amend-graph]', 'disabled'), '', 'signed out: Amend is disabled');
  assert.equal(await page.$('select[name=amend-filter]'), null, 'a graph never amended has no amend filter');

  // a client that may read but not amend: the dry run is refused with the scope it lacks
  const clientId = `tests/ui-amend-${slugid.nice()}`;
  const limited = await stack.root.request('auth', 'PUT', `/clients/${encodeURIComponent(clientId)}`, {
    description: 'browser test: no amend scope',
    expires: new Date(Date.now() + 3_600_000).toISOString(),
    scopes: ['auth:current-scopes'],
  });
  await page.goto(`${stack.api.rootUrl}/ui/task-graph/${taskGraphId}#signin?clientId=${encodeURIComponent(clientId)}&accessToken=${limited.accessToken}`);
  await page.waitForSelector(`nav.top .client-id:has-text("${clientId}")`);
  await page.click('button[name=amend-graph]');
  await waitForExpression(page, `document.querySelector('textarea[name=amend-file]')?.value.includes('"compile"')`, 15_000);
  await page.click('button[name=amend-dry-run]');
  const refused = (await (await page.waitForSelector('.amend-panel .amend-error')).textContent()) ?? '';
  assert.match(refused, /403 InsufficientScopes/);
  assert.match(refused, new RegExp(`Missing scope: scheduler:amend-task-graph:${taskGraphId}`));
  await page.click('button[name=amend-close]');

  // signed in with the scope: the editor holds the graph's current file, as submitted
  await page.goto(`${stack.api.rootUrl}/ui/task-graph/${taskGraphId}#signin?clientId=${encodeURIComponent(stack.api.root.clientId)}&accessToken=${stack.api.root.accessToken}`);
  await page.waitForSelector(`nav.top .client-id:has-text("${stack.api.root.clientId}")`);
  await waitForExpression(page, 'window.tgsGraph && window.tgsGraph.metrics.firstDraw !== undefined', 30_000);
  await page.click('button[name=amend-graph]');
  await waitForExpression(page, `document.querySelector('textarea[name=amend-file]')?.value.includes('"compile"')`, 15_000);
  const text = await page.inputValue('textarea[name=amend-file]');
  assert.deepEqual(Object.keys(JSON.parse(text).tasks), ['compile', 'package', 'docs']);
  assert.ok(await page.isDisabled('button[name=amend-apply]'), 'Apply waits for a dry run');

  // an uploaded YAML file (as `tgs graph amend` reads it) with a label more: dry run only
  const withLint = stringifyYaml({ tasks: { ...JSON.parse(text).tasks, lint: graphOf({ lint: {} }).tasks.lint } });
  await page.setInputFiles('input[name=amend-upload]', { name: 'graph.yml', mimeType: 'application/yaml', buffer: Buffer.from(withLint) });
  await waitForExpression(page, `document.querySelector('textarea[name=amend-file]')?.value.startsWith('tasks:')`);
  await page.click('button[name=amend-dry-run]');
  await page.waitForSelector('.amend-classification .amend-group[data-class=added] .amend-label:has-text("lint")');
  assert.equal(await page.textContent('.amend-classification [data-unchanged]'), '3');

  // back to the graph's file; one line edited: compile's command
  await page.click('button[name=amend-close]');
  await page.click('button[name=amend-graph]');
  await waitForExpression(page, `document.querySelector('textarea[name=amend-file]')?.value.includes('"compile"')`, 15_000);
  const edited = (await page.inputValue('textarea[name=amend-file]')).replace('"step": "make"', '"step": "make -j8"');
  assert.ok(edited.includes('make -j8'));
  await page.fill('textarea[name=amend-file]', edited);
  await page.click('button[name=amend-dry-run]');
  await page.waitForSelector('.amend-classification');
  const group = (cls: string) => page.$$eval(`.amend-classification .amend-group[data-class=${cls}] .amend-label`, (els) => els.map((e) => e.textContent));
  assert.deepEqual(await group('changed'), ['compile']);
  assert.deepEqual(await group('dependent'), ['package']);
  assert.deepEqual(await group('metadata'), []);
  assert.equal(await page.textContent('.amend-classification [data-unchanged]'), '1');
  assert.match((await page.textContent('.amend-classification [data-rerun-count]')) ?? '', /2 tasks would run again/);
  assert.equal(await graphState(taskGraphId), 'finished', 'a dry run changes nothing');

  await page.click('button[name=amend-apply]');
  await page.waitForSelector('.graph-header .action-result.ok:has-text("Amend #1 applied: 2 new tasks, 0 patched, 0 removed, 1 unchanged; the graph had finished: it runs again.")');
  assert.equal(await page.$('.amend-panel'), null, 'the panel closes');
  // the page loads the graph again: the new compile node is marked changed, package dependent, the old ones replaced
  await page.waitForSelector('.table-body .row[data-label=compile][data-amend=changed]', { timeout: 30_000 });
  // package reruns, or keeps its run when compile's outputs come out the same (early cutoff)
  assert.match((await page.getAttribute('.table-body .row[data-label=package]', 'data-amend')) ?? '', /^(dependent|kept)$/);
  const mark = (idx: string) => page.evaluate(`(window.tgsGraph.flags[${idx}] >> 5) & 7`);
  assert.equal(await mark(`window.tgsGraph.find('compile')`), 1, 'the drawing rings the new compile node as changed');
  assert.equal(await mark(`window.tgsGraph.indexOf(${JSON.stringify(ids.get('compile'))})`), 6, 'the old compile node is drawn as replaced');
  assert.match((await page.textContent('.legend.amend-legend')) ?? '', /changed.*replaced/);
  await expectCounts(page, { completed: 3 }, 'finished');
  assert.equal(await page.textContent('[data-total-tasks]'), '3', 'the replaced tasks are counted apart');
  assert.equal(await page.textContent('.summary .replaced-count'), ' (and 2 replaced by amends)');
  // the filter shows the replaced nodes (no members: the table leaves them out otherwise)
  await page.selectOption('select[name=amend-filter]', 'replaced');
  await waitForExpression(page, `document.querySelectorAll('.table-body .row[data-amend=replaced]').length === 2`);
  assert.equal(await page.textContent('.table-count'), '2 of 3 tasks');
  await page.close();
});

test('an amend by another client shows on an open page without a reload, even one that adds no node (a priority patch)', async () => {
  const { taskGraphId } = await submit({ first: {}, second: { requires: ['first'] } }, 'nobody');
  const page = await newPage();
  await openGraph(page, taskGraphId);
  await page.waitForSelector('.table-body .row[data-label=second]');
  assert.equal(await page.$('select[name=amend-filter]'), null, 'never amended: no amend filter');
  // a page-level flag the page's own reload would lose: the marks must arrive through the live feed
  await page.evaluate('window.notReloaded = true');
  const file = await stack.root.request<{ tasks: Record<string, { task: Record<string, unknown> }> }>('scheduler', 'GET', `/task-graph/${taskGraphId}/file`);
  file.tasks.second.task.priority = 'high';
  await stack.root.request('scheduler', 'PUT', `/task-graph/${taskGraphId}/amend`, { tasks: file.tasks });
  await page.waitForSelector('.table-body .row[data-label=second][data-amend=metadata]', { timeout: 30_000 });
  assert.equal(await page.getAttribute('.table-body .row[data-label=first]', 'data-amend'), null, 'first was not touched');
  assert.equal(await page.evaluate('window.notReloaded'), true, 'the page itself did not reload');
  assert.notEqual(await page.$('select[name=amend-filter]'), null, 'the amend filter appears');
  await page.close();
});

test('Amend on a graph stored before its nodes\' files were kept asks for an upload instead of showing a partial file', async () => {
  const { taskGraphId } = await submit({ early: {}, later: { requires: ['early'] } }, 'nobody');
  await stack.api.db.pool.query("UPDATE graph_nodes SET source = NULL WHERE task_graph_id = $1 AND label = 'early'", [taskGraphId]);
  const page = await newPage();
  await page.goto(`${stack.api.rootUrl}/ui/task-graph/${taskGraphId}#signin?clientId=${encodeURIComponent(stack.api.root.clientId)}&accessToken=${stack.api.root.accessToken}`);
  await waitForExpression(page, 'window.tgsGraph && window.tgsGraph.metrics.firstDraw !== undefined', 30_000);
  await page.click('button[name=amend-graph]');
  const note = (await (await page.waitForSelector('.amend-panel .amend-missing')).textContent()) ?? '';
  assert.match(note, /1 task was stored before tgs kept each task's file \(early\).*Upload your graph file instead/);
  assert.equal(await page.inputValue('textarea[name=amend-file]'), '', 'no file that would remove `early`');
  assert.ok(await page.isDisabled('button[name=amend-dry-run]'));
  await page.close();
});
