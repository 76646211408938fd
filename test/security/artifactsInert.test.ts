import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import { chromium, type Browser, type BrowserContext, type Page } from 'playwright-core';
import { startTestApi, type TestApi } from '../../support/api.js';
import { createTestTask } from '../helpers/queueTasks.js';
import { ApiClient } from '../../src/client/http.js';
import { artifactServingHeaders } from '../../src/queue/api/artifacts/serving.js';
import { chromiumOptions, ensureUiBuilt } from '../../support/uiBuild.js';

// A task author uploads artifacts that the API serves on the UI's origin. In headless Chromium: uploaded script
// never runs there (downloads, sandboxed, unsniffed), and no other site can frame the UI's pages. Each layer is
// also shown alone, next to a control where the same bytes without the headers do run the script, so these
// checks can fail.

let t: TestApi;
let browser: Browser;
let taskId: string;

/** The page script every hostile artifact carries: if it runs, the browser requests /xss-ran?<which>. */
const payload = (which: string) => `<script>fetch('/xss-ran?${which}')</script>`;

const ARTIFACTS: Record<string, { contentType: string; body: string }> = {
  'public/x.html': { contentType: 'text/html; charset=utf-8', body: `<!doctype html><h1 id="shown">hello</h1>${payload('html')}` },
  'public/x.svg': { contentType: 'image/svg+xml', body: `<svg xmlns="http://www.w3.org/2000/svg"><script>fetch('/xss-ran?svg')</script></svg>` },
  'public/x.xml': { contentType: 'application/xml', body: `<x xmlns:h="http://www.w3.org/1999/xhtml"><h:script>fetch('/xss-ran?xml')</h:script></x>` },
  'public/x.js': { contentType: 'text/javascript', body: `fetch('/xss-ran?js')` },
  'public/sniff.txt': { contentType: 'text/plain; charset=utf-8', body: `<!doctype html>${payload('txt')}` },
  'public/data.json': { contentType: 'application/json', body: `{"html": "${payload('json').replace(/'/g, '\\u0027')}"}` },
  'public/two-types': { contentType: 'text/plain, text/html', body: payload('two-types') },
  'public/unknown.bin': { contentType: 'application/x-tgs-unknown', body: payload('unknown') },
};

before(async () => {
  ensureUiBuilt();
  t = await startTestApi();
  taskId = await createTestTask(t, 'inert', {});
  const now = Date.now();
  const claim = await t.request('POST', '/api/queue/v1/claim-work/tgs-test/inert', { workerGroup: 'tests', workerId: 'inert', tasks: 1 });
  const run = claim.body.tasks[0];
  const api = new ApiClient(t.rootUrl, run.credentials);
  for (const [name, a] of Object.entries(ARTIFACTS)) {
    const { putUrl } = await api.request('queue', 'POST', `/task/${taskId}/runs/0/artifacts/${name}`, {
      storageType: 's3',
      contentType: a.contentType,
      expires: new Date(now + 3600_000).toISOString(),
    });
    // the stored content type is createArtifact's; the PUT's own does not matter
    const res = await fetch(putUrl, { method: 'PUT', headers: { 'content-type': 'application/octet-stream' }, body: a.body });
    assert.equal(res.status, 200, await res.text());
  }
  browser = await chromium.launch(chromiumOptions);
});
after(async () => {
  await browser?.close();
  await t?.close();
});

const artifactUrl = (name: string) => `${t.rootUrl}/api/queue/v1/task/${taskId}/runs/0/artifacts/${name}`;

/** A fresh context that records every request of a hostile script and every CSP report on the console. */
async function newContext(): Promise<{ context: BrowserContext; page: Page; ran: string[]; console: string[] }> {
  const context = await browser.newContext({ acceptDownloads: true });
  const ran: string[] = [];
  const consoleLines: string[] = [];
  context.on('request', (r) => r.url().includes('/xss-ran') && ran.push(new URL(r.url()).search.slice(1)));
  const page = await context.newPage();
  page.on('console', (m) => consoleLines.push(m.text()));
  return { context, page, ran, console: consoleLines };
}

/** Lets a page's script (if any runs) get its request out. */
const settle = (page: Page) => page.waitForTimeout(500);

test('artifact bytes carry nosniff and CSP sandbox; HTML, SVG, XML, JavaScript and unknown types download, text and JSON show', async () => {
  for (const [name, a] of Object.entries(ARTIFACTS)) {
    const res = await fetch(artifactUrl(name));
    assert.equal(res.status, 200, name);
    assert.equal(res.headers.get('x-content-type-options'), 'nosniff', name);
    assert.equal(res.headers.get('content-security-policy'), 'sandbox', name);
    const inline = ['public/sniff.txt', 'public/data.json'].includes(name);
    const base = name.split('/').pop() as string;
    assert.equal(res.headers.get('content-disposition'), inline ? null : `attachment; filename="${base}"; filename*=UTF-8''${base}`, name);
    // a content type a browser could read as something else is not passed on
    assert.equal(res.headers.get('content-type'), name === 'public/two-types' ? 'application/octet-stream' : a.contentType, name);
    assert.equal(await res.text(), a.body, `${name}: the bytes as uploaded`);
  }
});

test('an uploaded public/x.html opened on the UI\'s origin does not run its script (nor do SVG, XML, text or JSON)', async () => {
  const { context, page, ran } = await newContext();
  try {
    // Opened in the browser: it downloads (under its own name) instead of rendering.
    const [download] = await Promise.all([page.waitForEvent('download'), page.goto(artifactUrl('public/x.html')).catch(() => undefined)]);
    assert.equal(download.suggestedFilename(), 'x.html');
    for (const name of ['public/x.svg', 'public/x.xml', 'public/x.js', 'public/two-types', 'public/unknown.bin']) {
      await Promise.all([page.waitForEvent('download'), page.goto(artifactUrl(name)).catch(() => undefined)]);
    }
    // Shown inline: as text, never sniffed into HTML.
    await page.goto(artifactUrl('public/sniff.txt'));
    assert.match((await page.textContent('body')) ?? '', /<script>fetch\('\/xss-ran\?txt'\)<\/script>/);
    await page.goto(artifactUrl('public/data.json'));
    await settle(page);
    assert.deepEqual(ran, [], 'no uploaded script ran');

    // Were it ever rendered (a browser ignoring the attachment): CSP sandbox alone keeps the script off, and the
    // document has an opaque origin, not the UI's.
    // (routes see no request a redirect leads to: open the signed URL getArtifact redirects to directly)
    const signed = (await fetch(artifactUrl('public/x.html'), { redirect: 'manual' })).headers.get('location') as string;
    assert.match(signed, /\/artifact-data\//);
    const artifactData = (url: URL) => url.pathname.includes('/artifact-data/');
    await page.route(artifactData, async (route) => {
      const res = await route.fetch();
      const headers = { ...res.headers() };
      delete headers['content-disposition'];
      await route.fulfill({ status: res.status(), headers, body: await res.body() });
    });
    await page.goto(signed);
    assert.equal(await page.textContent('#shown'), 'hello', 'the document rendered');
    assert.equal(await page.evaluate('window.origin'), 'null', 'in an opaque origin');
    await settle(page);
    assert.deepEqual(ran, [], 'sandboxed: the script did not run');

    // Control: the same bytes without tgs's headers run the script, so the checks above can fail.
    await page.unroute(artifactData);
    await page.route(artifactData, async (route) => {
      const res = await route.fetch();
      await route.fulfill({ status: 200, headers: { 'content-type': 'text/html' }, body: await res.body() });
    });
    await page.goto(signed);
    await settle(page);
    assert.deepEqual(ran, ['html'], 'without the headers the script runs');
  } finally {
    await context.close();
  }
});

test('UI pages carry a CSP (default-src \'self\', frame-ancestors \'none\'): they work under it, and another site cannot frame them', async () => {
  for (const path of ['/ui/', '/ui/task-graph/whatever']) {
    const res = await fetch(`${t.rootUrl}${path}`);
    const csp = res.headers.get('content-security-policy') ?? '';
    assert.match(csp, /(^|; )default-src 'self'(;|$)/, path);
    assert.match(csp, /(^|; )frame-ancestors 'none'(;|$)/, path);
    assert.equal(res.headers.get('x-frame-options'), 'DENY');
  }

  const { context, page, console: consoleLines } = await newContext();
  try {
    // The list page renders with its script, stylesheet and API calls, and nothing trips the policy.
    await page.goto(`${t.rootUrl}/ui/`);
    await page.waitForSelector('nav.top');
    assert.deepEqual(consoleLines.filter((l) => /Content Security Policy/i.test(l)), [], 'no CSP violation on the UI page');

    // Another origin (a server of its own on another port: a page Chromium sees as public may not frame a loopback
    // address at all) frames the UI page (refused) and, as a control, a frameable page of the same server (loads).
    const control = `${t.rootUrl}/api/queue/v1/ping`;
    const attacker = createServer((_req, res) => {
      res.writeHead(200, { 'content-type': 'text/html' });
      res.end(`<iframe id="ui" src="${t.rootUrl}/ui/"></iframe><iframe id="control" src="${control}"></iframe>`);
    });
    await new Promise<void>((resolve) => attacker.listen(0, '127.0.0.1', resolve));
    after(() => attacker.close());
    await page.goto(`http://127.0.0.1:${(attacker.address() as AddressInfo).port}/`);
    const frames = async () => page.frames().map((f) => f.url());
    await settle(page);
    const controlFrame = page.frames().find((f) => f.url() === control);
    assert.ok(controlFrame, `the control frame loaded: ${JSON.stringify(await frames())}`);
    assert.match((await controlFrame.textContent('body')) ?? '', /alive/);
    const uiFrame = page.frames().find((f) => f.url().startsWith(`${t.rootUrl}/ui/`));
    const uiRendered = uiFrame ? await uiFrame.$('#app').then((el) => el !== null, () => false) : false;
    assert.equal(uiRendered, false, `the UI did not render inside the frame: ${JSON.stringify(await frames())}`);
    assert.ok(
      consoleLines.some((l) => l.includes(`Framing '${t.rootUrl}/'`) && /violates the following Content Security Policy directive: "frame-ancestors 'none'"/.test(l)),
      `the browser refused the frame: ${JSON.stringify(consoleLines)}`,
    );
  } finally {
    await context.close();
  }
});

test('serving headers: a stored content type a header cannot hold is served as octet-stream; file names are quoted safely', () => {
  const injected = artifactServingHeaders('public/a.txt', 'text/plain\r\nset-cookie: x=1');
  assert.equal(injected['content-type'], 'application/octet-stream');
  assert.equal(injected['content-disposition'], `attachment; filename="a.txt"; filename*=UTF-8''a.txt`);
  const odd = artifactServingHeaders('public/dir/rép "x";.html', 'TEXT/HTML; Charset=UTF-8');
  assert.equal(odd['content-type'], 'TEXT/HTML; Charset=UTF-8');
  assert.equal(odd['content-disposition'], `attachment; filename="r_p _x__.html"; filename*=UTF-8''r%C3%A9p%20%22x%22%3B.html`);
  // text stays readable in the browser, still sandboxed and unsniffed
  assert.deepEqual(artifactServingHeaders('public/logs/live.log', 'text/plain; charset=utf-8'), {
    'content-type': 'text/plain; charset=utf-8',
    'x-content-type-options': 'nosniff',
    'content-security-policy': 'sandbox',
  });
});
