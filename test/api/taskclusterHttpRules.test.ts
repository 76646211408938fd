import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { hawkHeader, startTestApi, type Credentials, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { preferredRedirectBody } from '../../src/api/redirect.js';

/**
 * Taskcluster's HTTP rules, as its clients rely on them, not as one client happens to call. The Python client
 * (taskcluster/taskcluster, clients/client-py/taskcluster/client.py) builds a URL like this:
 *   - `_subArgsInRoute`: each `<arg>` of the reference route is replaced by `urllib.parse.quote(str(value), '')`
 *     (every `/` of an artifact name becomes `%2F`), then the route's leading `/` is stripped;
 *   - `_makeApiCall`: `?` + `urlencode(query)` is appended when there is a query;
 *   - `_constructUrl`: `route.rstrip('/')`, so `/roles/` is called as `.../roles` and `listTasks('')`
 *     (`/tasks/<namespace>` with '') as `.../tasks`, while with a query the slash stays (`.../roles2/?limit=1`);
 *   - `taskcluster_urls.api(rootUrl, service, 'v1', path)`: `<rootUrl>/api/<service>/v1/<path>`.
 * It sends no Authorization header without credentials, `Accept: *\/*` (python-requests), never follows redirects
 * (`allow_redirects=False`), returns a JSON body as the result (a redirect's too) and `{"response": <response>}` for
 * any other body, and raises TaskclusterAuthFailure on 401, TaskclusterRestFailure with the body's `message` otherwise.
 */
function pythonQuote(value: string): string {
  return [...Buffer.from(value, 'utf8')].map((b) => (/[A-Za-z0-9_.~-]/.test(String.fromCharCode(b)) ? String.fromCharCode(b) : `%${b.toString(16).toUpperCase().padStart(2, '0')}`)).join('');
}

function pythonUrl(rootUrl: string, service: string, route: string, args: Record<string, string> = {}, query: Record<string, string> = {}): string {
  let path = route;
  for (const [name, value] of Object.entries(args)) path = path.replace(`<${name}>`, pythonQuote(value));
  path = path.replace(/^\/+/, '');
  if (Object.keys(query).length > 0) path += `?${new URLSearchParams(query).toString()}`;
  path = path.replace(/\/+$/, '');
  return `${rootUrl.replace(/\/+$/, '')}/api/${service}/v1/${path.replace(/^\/+/, '')}`;
}

let t: TestApi;
before(async () => {
  t = await startTestApi({ claimWorkWaitMs: 1000 });
});
after(async () => {
  await t?.close();
});

/** A request as the Python client sends it: Hawk over the exact URL (when it has credentials), `Accept: *\/*`. */
async function python(method: string, url: string, credentials: Credentials | null, body?: unknown, headers: Record<string, string> = {}) {
  const h: Record<string, string> = { accept: '*/*', ...headers };
  if (credentials) h.authorization = hawkHeader(url, method, credentials);
  if (body !== undefined) h['content-type'] = 'application/json';
  const res = await fetch(url, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body), redirect: 'manual' });
  const text = await res.text();
  let json: any;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  return { status: res.status, headers: res.headers, text, json };
}

const inAnHour = () => new Date(Date.now() + 3600_000).toISOString();

/** A completed task with these artifacts (s3, uploaded), indexed at `indexPath`. */
async function indexedTaskWith(indexPath: string, artifacts: Record<string, string>, errors: Record<string, { reason: string; message: string }> = {}): Promise<string> {
  const taskId = slugid.nice();
  const workerType = `http-${slugid.nice().slice(0, 8).replace(/[^a-zA-Z0-9]/g, 'x')}`;
  const created = await t.request('PUT', `/api/queue/v1/task/${taskId}`, { ...fastTask('http-rules'), workerType });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const claim = await t.request('POST', `/api/queue/v1/claim-work/tgs-test/${workerType}`, { workerGroup: 'g', workerId: 'w', tasks: 1 });
  const creds = claim.body.tasks[0].credentials as Credentials;
  for (const [name, content] of Object.entries(artifacts)) {
    const made = await t.request('POST', `/api/queue/v1/task/${taskId}/runs/0/artifacts/${name}`, { storageType: 's3', contentType: 'text/plain', expires: inAnHour() }, creds);
    assert.equal(made.status, 200, JSON.stringify(made.body));
    assert.equal((await fetch(made.body.putUrl, { method: 'PUT', headers: { 'content-type': 'text/plain' }, body: content })).status, 200);
  }
  for (const [name, error] of Object.entries(errors)) {
    const made = await t.request('POST', `/api/queue/v1/task/${taskId}/runs/0/artifacts/${name}`, { storageType: 'error', ...error, expires: inAnHour() }, creds);
    assert.equal(made.status, 200, JSON.stringify(made.body));
  }
  assert.equal((await t.request('POST', `/api/queue/v1/task/${taskId}/runs/0/completed`, undefined, creds)).status, 200);
  const indexed = await t.request('PUT', `/api/index/v1/task/${indexPath}`, { taskId, rank: 0, data: {}, expires: inAnHour() });
  assert.equal(indexed.status, 200, JSON.stringify(indexed.body));
  return taskId;
}

/** Taskcluster's error body: code, message, requestInfo {method, params, payload, time}. */
function assertErrorShape(body: any, code: string) {
  assert.equal(body?.code, code, JSON.stringify(body));
  assert.equal(typeof body.message, 'string');
  assert.deepEqual(Object.keys(body.requestInfo ?? {}).sort(), ['method', 'params', 'payload', 'time']);
}

test('a trailing slash is optional: the auth lists as the Python client calls them, and every other route', async () => {
  // the URL forms the Python client sends
  const root = 'https://tc.example.com';
  assert.equal(pythonUrl(root, 'auth', '/roles/'), `${root}/api/auth/v1/roles`);
  assert.equal(pythonUrl(root, 'auth', '/roleids/'), `${root}/api/auth/v1/roleids`);
  assert.equal(pythonUrl(root, 'auth', '/roles2/'), `${root}/api/auth/v1/roles2`);
  assert.equal(pythonUrl(root, 'auth', '/roles2/', {}, { limit: '1' }), `${root}/api/auth/v1/roles2/?limit=1`);
  assert.equal(pythonUrl(root, 'auth', '/clients/'), `${root}/api/auth/v1/clients`);
  assert.equal(pythonUrl(root, 'index', '/namespaces/<namespace>', { namespace: '' }), `${root}/api/index/v1/namespaces`);
  assert.equal(pythonUrl(root, 'index', '/tasks/<namespace>', { namespace: '' }), `${root}/api/index/v1/tasks`);
  assert.equal(pythonUrl(root, 'index', '/tasks/<namespace>', { namespace: '' }, { limit: '2' }), `${root}/api/index/v1/tasks/?limit=2`);
  assert.equal(
    pythonUrl(root, 'index', '/task/<indexPath>/artifacts/<name>', { indexPath: 'a.b', name: 'public/build/x.txt' }),
    `${root}/api/index/v1/task/a.b/artifacts/public%2Fbuild%2Fx.txt`,
  );

  const role = await t.request('PUT', '/api/auth/v1/roles/http-rules', { description: 'd', scopes: ['queue:get-task:*'] });
  assert.equal(role.status, 200, JSON.stringify(role.body));
  for (const route of ['/roles/', '/roleids/', '/roles2/', '/clients/']) {
    const bare = await python('GET', pythonUrl(t.rootUrl, 'auth', route), t.root);
    assert.equal(bare.status, 200, `${route} without its slash: ${bare.status} ${bare.text.slice(0, 300)}`);
    const slash = await python('GET', `${t.rootUrl}/api/auth/v1${route}`, t.root);
    assert.equal(slash.status, 200, `${route}: ${slash.status}`);
    assert.deepEqual(bare.json, slash.json, route);
  }
  const paged = await python('GET', pythonUrl(t.rootUrl, 'auth', '/roles2/', {}, { limit: '1' }), t.root);
  assert.equal(paged.status, 200, paged.text);
  assert.equal(paged.json.roles.length, 1);
  assert.equal(typeof paged.json.continuationToken, 'string');
  // routes declared without a trailing slash answer with one as well (express is not strict), with and without credentials
  const taskId = slugid.nice();
  assert.equal((await t.request('PUT', `/api/queue/v1/task/${taskId}`, fastTask('slash'))).status, 200);
  const status = await python('GET', `${t.rootUrl}/api/queue/v1/task/${taskId}/status/`, null);
  assert.equal(status.status, 200, status.text);
  assert.equal(status.json.status.taskId, taskId);
  assert.equal((await python('GET', `${t.rootUrl}/api/auth/v1/scopes/current/`, t.root)).status, 200);
  assert.equal((await python('GET', `${t.rootUrl}/api/queue/v1/ping/`, null)).status, 200);
  assert.equal((await python('GET', `${t.rootUrl}/api/queue/v1/openapi.json/`, null)).status, 200);
});

test('an optional last parameter may be empty: listNamespaces and listTasks of the root namespace', async () => {
  const taskId = slugid.nice();
  for (const path of ['httproot.one', 'httproot.two', 'rootentry']) {
    assert.equal((await t.request('PUT', `/api/index/v1/task/${path}`, { taskId, rank: 0, data: {}, expires: inAnHour() })).status, 200);
  }
  // the Python client's forms (no credentials: the anonymous role reads the index), then the other spellings
  for (const url of [
    pythonUrl(t.rootUrl, 'index', '/namespaces/<namespace>', { namespace: '' }),
    pythonUrl(t.rootUrl, 'index', '/namespaces/<namespace>', { namespace: '' }, { limit: '1000' }),
    `${t.rootUrl}/api/index/v1/namespaces/`,
  ]) {
    const res = await python('GET', url, null);
    assert.equal(res.status, 200, `${url}: ${res.status} ${res.text.slice(0, 300)}`);
    assert.ok(res.json.namespaces.some((n: { namespace: string }) => n.namespace === 'httproot'), url);
  }
  for (const url of [
    pythonUrl(t.rootUrl, 'index', '/tasks/<namespace>', { namespace: '' }),
    pythonUrl(t.rootUrl, 'index', '/tasks/<namespace>', { namespace: '' }, { limit: '1000' }),
    `${t.rootUrl}/api/index/v1/tasks/`,
  ]) {
    const res = await python('GET', url, null);
    assert.equal(res.status, 200, `${url}: ${res.status} ${res.text.slice(0, 300)}`);
    assert.deepEqual(res.json.tasks.map((x: { namespace: string }) => x.namespace), ['rootentry'], url);
  }
  // the root's scope is rendered with '' as Taskcluster renders it: `index:list-tasks:`
  const made = await t.request('PUT', '/api/auth/v1/clients/http-rules-lister', { description: 'x', expires: inAnHour(), scopes: ['index:list-tasks:httproot'] });
  assert.equal(made.status, 200, JSON.stringify(made.body));
  const anonymous = (await t.request('GET', '/api/auth/v1/roles/anonymous')).body as { scopes: string[]; description: string };
  const setAnonymous = async (scopes: string[]) =>
    assert.equal((await t.request('POST', '/api/auth/v1/roles/anonymous', { description: anonymous.description, scopes })).status, 200);
  await setAnonymous(anonymous.scopes.filter((s) => s !== 'index:list-tasks:*'));
  try {
    const lister = { clientId: 'http-rules-lister', accessToken: made.body.accessToken as string };
    assert.equal((await python('GET', pythonUrl(t.rootUrl, 'index', '/tasks/<namespace>', { namespace: 'httproot' }), lister)).status, 200);
    const root = await python('GET', pythonUrl(t.rootUrl, 'index', '/tasks/<namespace>', { namespace: '' }), lister);
    assert.equal(root.status, 403, root.text);
    assert.deepEqual(root.json.details?.required, 'index:list-tasks:');
  } finally {
    await setAnonymous(anonymous.scopes);
  }
  // a non-empty namespace keeps its rules, and a slash after it is optional too
  assert.equal((await python('GET', `${t.rootUrl}/api/index/v1/tasks/httproot/`, null)).json.tasks.length, 2);
  assert.equal((await python('GET', `${t.rootUrl}/api/index/v1/tasks/a..b`, null)).status, 400);
});

test('findArtifactFromTask answers 303 with express\'s text body, never JSON; the queue\'s redirect keeps its JSON', async () => {
  const taskId = await indexedTaskWith('httprules.redirect', { 'public/build/x.txt': 'x\n' });
  const url = pythonUrl(t.rootUrl, 'index', '/task/<indexPath>/artifacts/<name>', { indexPath: 'httprules.redirect', name: 'public/build/x.txt' });
  const res = await python('GET', url, null);
  assert.equal(res.status, 303, res.text);
  const location = res.headers.get('location') as string;
  assert.equal(location, `${t.rootUrl}/api/queue/v1/task/${taskId}/artifacts/public/build/x.txt`);
  // what `res.redirect(303, url)` sends to `Accept: */*`: so the Python client returns {"response": <response>}
  // and taskgraph's get_artifact_from_index follows its Location header
  assert.equal(res.headers.get('content-type'), 'text/plain; charset=utf-8');
  assert.equal(res.text, `See Other. Redirecting to ${location}`);
  assert.equal(res.json, undefined, 'the body is not JSON');
  assert.equal(res.headers.get('vary'), 'Accept');
  // no Accept header: text too; a browser gets HTML; a client accepting neither an empty body
  const bare = await fetch(url, { redirect: 'manual', headers: { accept: '' } });
  assert.equal(bare.headers.get('content-type'), 'text/plain; charset=utf-8');
  const browser = await python('GET', url, null, undefined, { accept: 'text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8' });
  assert.equal(browser.status, 303);
  assert.equal(browser.headers.get('content-type'), 'text/html; charset=utf-8');
  assert.match(browser.text, /^<!DOCTYPE html><head><title>See Other<\/title><\/head><body><p>See Other\. Redirecting to /);
  const json = await python('GET', url, null, undefined, { accept: 'application/json' });
  assert.equal(json.status, 303);
  assert.equal(json.text, '');
  assert.equal(json.headers.get('location'), location);
  // with credentials, the index path as the Python client quotes it
  assert.equal((await python('GET', url, t.root)).text, `See Other. Redirecting to ${location}`);

  // The queue's getLatestArtifact: Taskcluster replies `res.reply({storageType, url}, 303)`, which taskgraph's
  // get_artifact reads (`response["url"]`), with the storage type in a header.
  const queue = await python('GET', pythonUrl(t.rootUrl, 'queue', '/task/<taskId>/artifacts/<name>', { taskId, name: 'public/build/x.txt' }), null);
  assert.equal(queue.status, 303, queue.text);
  assert.equal(queue.json.storageType, 's3');
  assert.equal(queue.json.url, queue.headers.get('location'));
  assert.equal(queue.headers.get('x-taskcluster-artifact-storage-type'), 's3');
  // a wildcard parameter keeps a trailing slash, as express's `{*name}` does: `public/build/x.txt/` is another name
  assert.equal((await python('GET', `${t.rootUrl}/api/queue/v1/task/${taskId}/artifacts/public/build/x.txt/`, null)).status, 404);
  assert.equal((await python('GET', `${t.rootUrl}/api/index/v1/task/httprules.redirect/artifacts/public/build/x.txt/`, null)).headers.get('location'), `${location}/`);
});

test('preferredRedirectBody negotiates as express\'s res.format does', () => {
  assert.equal(preferredRedirectBody(undefined), 'text/plain');
  assert.equal(preferredRedirectBody('*/*'), 'text/plain');
  assert.equal(preferredRedirectBody('text/*'), 'text/plain');
  assert.equal(preferredRedirectBody('text/html'), 'text/html');
  assert.equal(preferredRedirectBody('text/plain;q=0.5, text/html'), 'text/html');
  assert.equal(preferredRedirectBody('application/json, */*;q=0.1'), 'text/plain');
  assert.equal(preferredRedirectBody('application/json'), undefined);
  assert.equal(preferredRedirectBody('text/plain;q=0, */*'), 'text/html');
});

test('no credentials is the anonymous role: 403 InsufficientScopes; credentials that do not authenticate: 401', async () => {
  const taskId = await indexedTaskWith('httprules.private', { 'private/secret.txt': 'hush' });
  const anonymousReads = [
    pythonUrl(t.rootUrl, 'queue', '/task/<taskId>/artifacts/<name>', { taskId, name: 'private/secret.txt' }),
    pythonUrl(t.rootUrl, 'queue', '/task/<taskId>/artifact-content/<name>', { taskId, name: 'private/secret.txt' }),
    pythonUrl(t.rootUrl, 'queue', '/task/<taskId>/runs/<runId>/artifacts/<name>', { taskId, runId: '0', name: 'private/secret.txt' }),
    pythonUrl(t.rootUrl, 'index', '/task/<indexPath>/artifacts/<name>', { indexPath: 'httprules.private', name: 'private/secret.txt' }),
    pythonUrl(t.rootUrl, 'auth', '/clients/'),
    pythonUrl(t.rootUrl, 'auth', '/scopes/current'),
  ];
  for (const url of anonymousReads) {
    const res = await python('GET', url, null);
    assert.equal(res.status, 403, `${url}: ${res.status} ${res.text.slice(0, 300)}`);
    assertErrorShape(res.json, 'InsufficientScopes');
    assert.equal(res.headers.get('www-authenticate'), null);
  }
  // writes too, refused before any body is read (test/security/authBeforeBody.test.ts measures it)
  const graph = await python('PUT', `${t.rootUrl}/api/scheduler/v1/task-graph/${slugid.nice()}`, null, { tasks: [] });
  assert.equal(graph.status, 403, graph.text);
  assertErrorShape(graph.json, 'InsufficientScopes');
  assert.match(graph.json.message, /scheduler:create-task-graph/);
  const cancel = await python('POST', `${t.rootUrl}/api/queue/v1/task/${taskId}/cancel`, null);
  assert.equal(cancel.status, 403, cancel.text);
  assertErrorShape(cancel.json, 'InsufficientScopes');

  // credentials that do not authenticate stay 401, with Taskcluster's www-authenticate header
  for (const credentials of [{ ...t.root, accessToken: 'wrong' }, { clientId: 'no-such-client', accessToken: 'x' }]) {
    const res = await python('GET', anonymousReads[0], credentials);
    assert.equal(res.status, 401, res.text);
    assertErrorShape(res.json, 'AuthenticationFailed');
    assert.equal(res.headers.get('www-authenticate'), 'hawk');
  }
});

test('an error artifact answers 424 with Taskcluster\'s {reason, message}', async () => {
  const taskId = await indexedTaskWith('httprules.error', {}, { 'public/missing.txt': { reason: 'file-missing-on-worker', message: 'no such file: missing.txt' } });
  for (const url of [
    pythonUrl(t.rootUrl, 'queue', '/task/<taskId>/artifacts/<name>', { taskId, name: 'public/missing.txt' }),
    pythonUrl(t.rootUrl, 'queue', '/task/<taskId>/runs/<runId>/artifacts/<name>', { taskId, runId: '0', name: 'public/missing.txt' }),
  ]) {
    const res = await python('GET', url, null);
    assert.equal(res.status, 424, res.text);
    assert.match(res.headers.get('content-type') ?? '', /^application\/json/);
    assert.equal(res.headers.get('x-taskcluster-artifact-storage-type'), 'error');
    // the Python client raises TaskclusterRestFailure with the body's `message`: the artifact's own
    assert.deepEqual(res.json, { code: 'ArtifactNotPresent', reason: 'file-missing-on-worker', message: 'no such file: missing.txt' });
  }
});

test('an unknown route answers 404 ResourceNotFound, whatever the body; it is not read', async () => {
  const url = `${t.rootUrl}/api/scheduler/v1/task-graph/${slugid.nice()}/transmogrify`;
  const big = JSON.stringify({ tasks: 'x'.repeat(512 * 1024) });
  for (const [method, credentials] of [['PUT', t.root], ['POST', null], ['GET', null]] as const) {
    const res = await python(method, url, credentials, method === 'GET' ? undefined : JSON.parse(big));
    assert.equal(res.status, 404, `${method}: ${res.status} ${res.text.slice(0, 300)}`);
    assertErrorShape(res.json, 'ResourceNotFound');
    assert.deepEqual(res.json.requestInfo.payload, {}, 'the body was not read');
  }
  // a known route with a method it does not serve is unknown as well (express's router answers 404)
  const wrongMethod = await python('DELETE', `${t.rootUrl}/api/auth/v1/roles`, null, JSON.parse(big));
  assert.equal(wrongMethod.status, 404, wrongMethod.text.slice(0, 300));
  // and a known route still refuses a body over its limit
  const tooBig = await python('POST', `${t.rootUrl}/api/queue/v1/task/${slugid.nice()}/cancel`, t.root, JSON.parse(big));
  assert.equal(tooBig.status, 413, tooBig.text.slice(0, 300));
});
