import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { chromium, type Browser } from 'playwright-core';
import { eventually, startStack, type Stack } from '../../support/stack.js';
import { startFastWorker } from '../../support/fastWorker.js';
import { fastTask, graphOf } from '../../support/graphs.js';
import { chromiumOptions, ensureUiBuilt } from '../../support/uiBuild.js';

// The hooks page (/ui/hooks) in headless Chromium against the real stack: each hook with its next fire (a scheduled
// hook's, from its Temporal Schedule) and its last fires, a task's fire linking to the task, a task-graph's to the
// graph, a refused fire shown as an error; signed out, the page asks to sign in (hooks' reads need scopes).

let stack: Stack;
let browser: Browser;
let worker: ReturnType<typeof startFastWorker>;
const metadata = { name: 'ui hook', description: 'shown on the hooks page', owner: 'hooks@example.com' };

before(async () => {
  ensureUiBuilt();
  stack = await startStack();
  worker = startFastWorker({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'fast' });
  browser = await chromium.launch(chromiumOptions);
});
after(async () => {
  await browser?.close();
  await worker?.stop();
  await stack?.stop();
});

function ok(res: { status: number; body: any }) {
  assert.ok(res.status < 400, `${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

test('the hooks page lists each hook with its next and last fires, each fire linking to its task or graph', async () => {
  const role = (id: string, scopes: string[]) => stack.api.request('PUT', `/api/auth/v1/roles/${encodeURIComponent(`hook-id:ui/${id}`)}`, { description: 'ui test', scopes });
  ok(await role('nightly', ['queue:create-task:lowest:tgs-test/fast', 'queue:scheduler-id:-']));
  ok(await role('graph', ['scheduler:create-task-graph', 'queue:create-task:lowest:tgs-test/fast', `queue:scheduler-id:${stack.config.schedulerId}`]));
  const timed = { ...fastTask('nightly'), created: '${now}', deadline: { $fromNow: '1 hour' } };
  // every minute: a next fire to show; triggered once so it has a fire
  ok(await stack.api.request('PUT', '/api/hooks/v1/hooks/ui/nightly', { metadata: { ...metadata, name: 'nightly build' }, schedule: ['0 * * * * *'], task: timed }));
  const { taskId } = ok(await stack.api.request('POST', '/api/hooks/v1/hooks/ui/nightly/trigger', {}));
  ok(await stack.api.request('PUT', '/api/hooks/v1/hooks/ui/graph', { metadata: { ...metadata, name: 'graph maker' }, task: graphOf({ a: {}, b: { requires: ['a'] } }) }));
  const { taskId: taskGraphId } = ok(await stack.api.request('POST', '/api/hooks/v1/hooks/ui/graph/trigger', {}));
  // no role: its fire is refused and recorded as an error
  ok(await stack.api.request('PUT', '/api/hooks/v1/hooks/ui/refused', { metadata: { ...metadata, name: 'no scopes' }, task: fastTask('refused') }));
  assert.equal((await stack.api.request('POST', '/api/hooks/v1/hooks/ui/refused/trigger', {})).status, 403);
  await eventually(async () => (await stack.api.request('GET', `/api/scheduler/v1/task-graph/${taskGraphId}/status`)).body.status?.state === 'finished', 'the hook\'s graph finished', 60_000);

  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('pageerror', (err) => console.error(`page error: ${err.message}`));
  await page.goto(`${stack.api.rootUrl}/ui/hooks`);
  await page.waitForSelector('.hooks-page :text("Sign in to see hooks")');
  const { clientId, accessToken } = stack.api.root;
  await page.goto(`${stack.api.rootUrl}/ui/hooks#signin?clientId=${encodeURIComponent(clientId)}&accessToken=${encodeURIComponent(accessToken)}`);
  const row = (id: string) => `table.hooks tr[data-hook="ui/${id}"]`;
  await page.waitForSelector(row('refused'));

  assert.match((await page.textContent(`${row('nightly')} td:first-child`)) ?? '', /nightly build/);
  assert.match((await page.textContent(`${row('nightly')} .next-fire`)) ?? '', /^in \d+ s$|^now$/);
  const nextTitle = await page.getAttribute(`${row('nightly')} .next-fire`, 'title');
  assert.ok(nextTitle && Date.parse(nextTitle) > Date.now() - 60_000, `next fire ${nextTitle}`);
  assert.match((await page.textContent(`${row('graph')} .next-fire`)) ?? '', /—/);
  assert.match((await page.textContent(`${row('refused')} .last-fires`)) ?? '', /error.*triggerHook/);

  // a task's fire leads to the task, a graph's to the graph
  await page.waitForSelector(`${row('graph')} .fire[data-task-id="${taskGraphId}"]:has-text("graph")`);
  assert.equal(await page.getAttribute(`${row('graph')} .fire a`, 'href'), `/ui/task-graph/${taskGraphId}`);
  await page.click(`${row('nightly')} .fire[data-task-id="${taskId}"] a`);
  await page.waitForURL(new RegExp(`/ui/task/${taskId}$`));
  await page.goBack();
  await page.click(`${row('graph')} .fire a`);
  await page.waitForURL(new RegExp(`/ui/task-graph/${taskGraphId}$`));
  await page.waitForSelector('[data-graph-state=finished]');
  await page.close();
});

test('each hook can be paused and resumed, triggered and edited from the page; a paused hook shows no next fire; a refused fire shows its reason in full', async () => {
  const role = (id: string) => stack.api.request('PUT', `/api/auth/v1/roles/${encodeURIComponent(`hook-id:ui/${id}`)}`, { description: 'ui test', scopes: ['queue:create-task:lowest:tgs-test/fast', 'queue:scheduler-id:-'] });
  ok(await role('acted'));
  const timed = { ...fastTask('acted'), created: '${now}', deadline: { $fromNow: '1 hour' } };
  ok(await stack.api.request('PUT', '/api/hooks/v1/hooks/ui/acted', { metadata: { ...metadata, name: 'acted on' }, schedule: ['0 0 * * * *'], task: timed }));
  // a fire refused with a message of several lines
  ok(await stack.api.request('PUT', '/api/hooks/v1/hooks/ui/broken', { metadata: { ...metadata, name: 'broken template' }, task: { ...fastTask('broken'), payload: { $eval: 'nope(' } } }));
  await stack.api.request('POST', '/api/hooks/v1/hooks/ui/broken/trigger', {});
  const lastError = ok(await stack.api.request('GET', '/api/hooks/v1/hooks/ui/broken/last-fires')).lastFires[0].error as string;

  const page = await browser.newPage({ viewport: { width: 1400, height: 900 } });
  page.on('pageerror', (err) => console.error(`page error: ${err.message}`));
  const { clientId, accessToken } = stack.api.root;
  await page.goto(`${stack.api.rootUrl}/ui/hooks#signin?clientId=${encodeURIComponent(clientId)}&accessToken=${encodeURIComponent(accessToken)}`);
  const row = (id: string) => `table.hooks tr[data-hook="ui/${id}"]`;
  await page.waitForSelector(`${row('acted')} .next-fire:has-text("in ")`);

  // the refused fire's reason, in full and as text (not a tooltip, not JSON)
  const shown = (await page.textContent(`${row('broken')} .fire-error`)) ?? '';
  const message = (JSON.parse(lastError) as { message?: string }).message ?? lastError;
  assert.equal(shown, message);
  assert.doesNotMatch(shown, /^\{"message"/);

  await page.click(`${row('acted')} button[name=pause-hook]`);
  await page.waitForSelector(`${row('acted')} .action-result.ok:has-text("Paused")`);
  await page.waitForSelector(`${row('acted')} .next-fire[data-paused="1"]:has-text("paused")`);
  assert.doesNotMatch((await page.textContent(`${row('acted')} .next-fire`)) ?? '', /now|in /);
  assert.equal(ok(await stack.api.request('GET', '/api/hooks/v1/hooks/ui/acted/schedule')).paused, true);
  await page.click(`${row('acted')} button[name=resume-hook]`);
  await page.waitForSelector(`${row('acted')} .next-fire:has-text("in ")`);
  assert.equal(ok(await stack.api.request('GET', '/api/hooks/v1/hooks/ui/acted/schedule')).paused, false);

  await page.click(`${row('acted')} button[name=trigger-hook]`);
  const fired = (await (await page.waitForSelector(`${row('acted')} .action-result.ok:has-text("Fired:")`)).textContent()) ?? '';
  const taskId = /Fired: ([A-Za-z0-9_-]{22})/.exec(fired)?.[1];
  assert.ok(taskId, fired);
  await page.waitForSelector(`${row('acted')} .fire[data-task-id="${taskId}"]`);

  // edit: the definition as JSON; a mistake is refused in full, a good change is saved and shown
  await page.click(`${row('acted')} button[name=edit-hook]`);
  const textarea = `${row('acted')} textarea[name=hook-definition]`;
  await waitForText(page, textarea);
  const definition = JSON.parse(await page.inputValue(textarea)) as { metadata: { name: string } };
  assert.equal(definition.metadata.name, 'acted on');
  await page.fill(textarea, '{ not json');
  await page.click(`${row('acted')} button[name=save-hook]`);
  await page.waitForSelector(`${row('acted')} .action-result.error:has-text("not JSON")`);
  await page.fill(textarea, JSON.stringify({ ...definition, metadata: { ...definition.metadata, name: 'renamed here' } }, null, 2));
  await page.click(`${row('acted')} button[name=save-hook]`);
  await page.waitForSelector(`${row('acted')} td:first-child:has-text("renamed here")`);
  assert.equal(ok(await stack.api.request('GET', '/api/hooks/v1/hooks/ui/acted')).metadata.name, 'renamed here');
  await page.close();
});

/** Waits until a form field holds something (the definition is read when Edit is pressed). */
async function waitForText(page: import('playwright-core').Page, selector: string) {
  await eventually(async () => (await page.inputValue(selector).catch(() => '')).length > 0, `${selector} filled`);
}
