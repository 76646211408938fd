import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import WebSocket from 'ws';
import { startTestApi, hawkHeader, type Credentials, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { eventually } from '../../support/stack.js';
import { WorkerStream, type StreamClaim } from '../../src/client/workerStream.js';
import { TgsApiError } from '../../src/client/http.js';
import { CLOSE, MAX_STREAM_CAPACITY } from '../../src/queue/workerStream/frames.js';
import { registry } from '../../src/observability/metrics.js';

/*
 * The worker stream (GET /worker-stream/<pool>/<group>/<id> upgraded to a WebSocket): claims pushed while the
 * worker has capacity, reports in frames, refusals before any work, drains and reconnects, the API's stop.
 */

let t: TestApi;
let worker: Credentials;
before(async () => {
  // a stream drains after 2 s here (60 s by default): the drain test sees several
  t = await startTestApi({ claimWorkWaitMs: 1500, workerStreamMaxAgeMs: 2000 });
  // a least-privilege worker: claim-work on the st-* pools and its own group's worker ids only
  const clientId = `workers/${slugid.nice()}`;
  const made = await t.request('PUT', `/api/auth/v1/clients/${encodeURIComponent(clientId)}`, {
    description: 'a worker with worker scopes only',
    expires: new Date(Date.now() + 3600_000).toISOString(),
    scopes: ['queue:claim-work:tgs-test/st-*', 'queue:worker-id:st-group/*'],
  });
  assert.equal(made.status, 200, JSON.stringify(made.body));
  worker = { clientId, accessToken: made.body.accessToken };
});
after(async () => {
  await t.close();
});

async function createTasks(workerType: string, n: number, extra: Record<string, unknown> = {}): Promise<string[]> {
  const ids: string[] = [];
  for (let i = 0; i < n; i++) {
    const taskId = slugid.nice();
    const res = await t.request('PUT', `/api/queue/v1/task/${taskId}`, { ...fastTask(`t${i}`), workerType, ...extra });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    ids.push(taskId);
  }
  return ids;
}

const status = async (taskId: string) => (await t.request('GET', `/api/queue/v1/task/${taskId}/status`)).body.status;

function openStream(workerType: string, capacity: number, options: { credentials?: Credentials; workerId?: string; workerGroup?: string } = {}) {
  const claims: StreamClaim[] = [];
  const lines: string[] = [];
  const stream = new WorkerStream({
    rootUrl: t.rootUrl,
    credentials: 'credentials' in options ? options.credentials : worker,
    provisionerId: 'tgs-test',
    workerType,
    workerGroup: options.workerGroup ?? 'st-group',
    workerId: options.workerId ?? 'w1',
    capacity,
    onClaim: (claim) => claims.push(claim),
    log: (line) => lines.push(line),
  });
  return { stream, claims, lines };
}

test('the API pushes claims up to the worker\'s capacity and more as it gives capacity back; reports resolve the runs', async () => {
  const ids = await createTasks('st-push', 5);
  const { stream, claims } = openStream('st-push', 3);
  try {
    await stream.opened;
    await eventually(async () => claims.length === 3, 'three claims pushed');
    // capacity 3: the other two wait, however long
    await new Promise((r) => setTimeout(r, 300));
    assert.equal(claims.length, 3);
    for (const c of claims) {
      assert.equal(c.workerGroup, 'st-group');
      assert.equal(c.workerId, 'w1');
      assert.ok(c.credentials.certificate, 'each run comes with its temporary credentials, as claimWork gives them');
      assert.equal((await status(c.status.taskId)).state, 'running');
    }
    const results = await stream.resolve(claims.map((c) => ({ taskId: c.status.taskId, runId: c.runId, outcome: 'completed' as const })));
    assert.deepEqual(results.map((r) => ('status' in r ? r.status.state : r.error.code)), ['completed', 'completed', 'completed']);
    stream.release(3);
    await eventually(async () => claims.length === 5, 'the other two pushed once capacity came back');
    assert.deepEqual(new Set(claims.map((c) => c.status.taskId)), new Set(ids), 'every task once');
    // a task created while the worker waits is pushed at once (the claimWork long-poll's NOTIFY wake-up)
    const [late] = await createTasks('st-push', 1);
    await eventually(async () => claims.some((c) => c.status.taskId === late), 'a new task pushed');
    const rest = claims.slice(3).map((c) => ({ taskId: c.status.taskId, runId: c.runId, outcome: 'failed' as const }));
    const answers = await stream.resolve(rest);
    assert.ok(answers.every((r) => 'status' in r && r.status.state === 'failed'));
    // reported again: the same answer (a report repeated answers as the first did)
    assert.deepEqual((await stream.resolve(rest.slice(0, 1)))[0], answers[0]);
  } finally {
    await stream.close();
  }
});

test('a worker stream is refused before anything is claimed: no upgrade 400, anonymous 403, bad credentials 401, another pool or group 403', async () => {
  const [taskId] = await createTasks('st-refused', 1);
  const plain = await t.request('GET', '/api/queue/v1/worker-stream/tgs-test/st-refused/st-group/w1', undefined, worker);
  assert.equal(plain.status, 400);
  assert.equal(plain.body.code, 'InputError');
  assert.match(plain.body.message, /WebSocket/);
  const refusals: [string, Parameters<typeof openStream>[2], number, string][] = [
    ['st-refused', { credentials: undefined }, 403, 'InsufficientScopes'],
    ['st-refused', { workerGroup: 'other-group' }, 403, 'InsufficientScopes'],
    ['st-refused', { credentials: { clientId: worker.clientId, accessToken: 'not-the-token' } }, 401, 'AuthenticationFailed'],
  ];
  for (const [workerType, options, code, name] of refusals) {
    const { stream } = openStream(workerType, 4, options);
    await assert.rejects(stream.opened, (err: TgsApiError) => err.status === code && err.code === name);
  }
  const { stream } = openStream('other-pool', 4);
  await assert.rejects(stream.opened, (err: TgsApiError) => err.status === 403 && /queue:claim-work:tgs-test\/other-pool/.test(err.message));
  assert.equal((await status(taskId)).state, 'pending', 'nothing was claimed');
});

/** A raw WebSocket on the stream, signed as `credentials`, with every frame it receives and its close. */
async function rawStream(workerType: string, credentials: Credentials = worker) {
  const url = `${t.rootUrl}/api/queue/v1/worker-stream/tgs-test/${workerType}/st-group/raw`;
  const ws = new WebSocket(url.replace(/^http/, 'ws'), { headers: { authorization: hawkHeader(url, 'GET', credentials) } });
  const frames: any[] = [];
  const closed = new Promise<{ code: number; reason: string }>((resolve) => ws.on('close', (code, reason) => resolve({ code, reason: String(reason) })));
  ws.on('message', (data) => frames.push(JSON.parse(String(data))));
  await new Promise((resolve, reject) => (ws.once('open', resolve), ws.once('error', reject)));
  await eventually(async () => frames.some((f) => f.type === 'welcome'), 'welcome');
  return { ws, frames, closed };
}

test('frames that are not the protocol\'s end the stream with an error frame saying why, before anything is done', async () => {
  const cases: [string, (ws: WebSocket) => void, RegExp][] = [
    ['not JSON', (ws) => ws.send('{"type":'), /not JSON/],
    ['binary', (ws) => ws.send(Buffer.from('{}'), { binary: true }), /binary/],
    ['unknown type', (ws) => ws.send(JSON.stringify({ type: 'claim', tasks: 1 })), /schema/],
    ['capacity over the bound', (ws) => ws.send(JSON.stringify({ type: 'capacity', tasks: MAX_STREAM_CAPACITY + 1 })), /schema/],
    ['capacity over the bound in two frames', (ws) => (ws.send(JSON.stringify({ type: 'capacity', tasks: 200 })), ws.send(JSON.stringify({ type: 'capacity', tasks: 100 }))), /over the stream's 256/],
    ['101 resolutions', (ws) => ws.send(JSON.stringify({ type: 'resolve', id: 1, resolutions: Array.from({ length: 101 }, () => ({ taskId: slugid.nice(), runId: 0, outcome: 'completed' })) })), /schema/],
    ['a deep value', (ws) => ws.send(`{"type":"resolve","id":1,"resolutions":${'['.repeat(20_000)}${']'.repeat(20_000)}}`), /schema|cannot be stored/],
  ];
  for (const [what, send, message] of cases) {
    const { ws, frames, closed } = await rawStream('st-frames');
    send(ws);
    const { code } = await closed;
    assert.equal(code, CLOSE.protocolError, what);
    const error = frames.find((f) => f.type === 'error');
    assert.ok(error, `${what}: an error frame`);
    assert.match(error.message, message, what);
    assert.match(error.code, /^Input/, what);
  }
  // a frame over 256 KiB is refused by the WebSocket layer itself (1009 message too big)
  const { ws, closed } = await rawStream('st-frames');
  ws.send(JSON.stringify({ type: 'capacity', tasks: 1, pad: 'x'.repeat(300 * 1024) }));
  assert.equal((await closed).code, 1009);
});

test('a least-privilege worker reports its own runs on the stream, never another worker\'s: the frame is refused whole', async () => {
  const [own, others] = await createTasks('st-least', 2);
  // another worker of another group claims one of them over claimWork
  const claimed = await t.request('POST', '/api/queue/v1/claim-work/tgs-test/st-least', { workerGroup: 'elsewhere', workerId: 'x', tasks: 1 });
  assert.equal(claimed.body.tasks.length, 1);
  const theirs = claimed.body.tasks[0].status.taskId === own ? own : others;
  const mine = theirs === own ? others : own;
  const { stream, claims } = openStream('st-least', 1);
  try {
    await eventually(async () => claims.length === 1, 'claimed');
    assert.equal(claims[0].status.taskId, mine);
    await assert.rejects(
      stream.resolve([
        { taskId: mine, runId: 0, outcome: 'completed' },
        { taskId: theirs, runId: 0, outcome: 'completed' },
      ]),
      (err: TgsApiError) => err.status === 403 && err.code === 'InsufficientScopes' && err.message.includes(`queue:worker-id:elsewhere/x`),
    );
    assert.equal((await status(mine)).state, 'running', 'nothing of the refused frame was resolved');
    assert.equal((await status(theirs)).state, 'running');
    const [answer] = await stream.resolve([{ taskId: mine, runId: 0, outcome: 'completed' }]);
    assert.ok('status' in answer && answer.status.state === 'completed');
  } finally {
    await stream.close();
  }
});

test('streams drain at their maximum age: the worker opens a new one, and no claim or report is lost or made twice', async () => {
  const n = 60;
  const ids = await createTasks('st-drain', n);
  const { stream, claims, lines } = openStream('st-drain', 4);
  const answers: string[] = [];
  try {
    const started = Date.now();
    // a slow worker: one task at a time every 100 ms, over three or more drains (every 2 s here)
    while (answers.length < n) {
      await eventually(async () => claims.length > answers.length, 'a claim', 20_000);
      const c = claims[answers.length];
      await new Promise((r) => setTimeout(r, 100));
      const [answer] = await stream.resolve([{ taskId: c.status.taskId, runId: c.runId, outcome: 'completed' }]);
      assert.ok('status' in answer, JSON.stringify(answer));
      answers.push(answer.status.taskId);
      stream.release();
    }
    assert.ok(Date.now() - started > 4000, 'the run outlived two drains');
    assert.equal(claims.length, n, 'no task claimed twice');
    assert.deepEqual(new Set(answers), new Set(ids));
    for (const id of ids) assert.equal((await status(id)).runs.length, 1, `${id}: one run`);
    assert.deepEqual(lines, [], 'a drain is not a loss: nothing logged');
  } finally {
    await stream.close();
  }
});

test('a stream drains when its credentials expire, and the worker\'s next one is refused', async () => {
  const clientId = `workers/${slugid.nice()}`;
  // sooner than the stream's maximum age here (2 s)
  const expires = Date.now() + 1500;
  const made = await t.request('PUT', `/api/auth/v1/clients/${encodeURIComponent(clientId)}`, {
    description: 'a worker whose client expires in 1.5 s',
    expires: new Date(expires).toISOString(),
    scopes: ['queue:claim-work:tgs-test/st-expiry', 'queue:worker-id:st-group/*'],
  });
  assert.equal(made.status, 200, JSON.stringify(made.body));
  const { ws, frames, closed } = await rawStream('st-expiry', { clientId, accessToken: made.body.accessToken });
  const welcome = frames.find((f) => f.type === 'welcome');
  assert.equal(Date.parse(welcome.drainsAt), expires);
  const draining = await eventually(async () => frames.find((f) => f.type === 'draining'), 'drained');
  assert.match(draining.reason, /credentials expire/);
  assert.ok(Date.now() >= expires);
  ws.close();
  await closed;
  await new Promise((r) => setTimeout(r, Math.max(0, expires - Date.now() + 100)));
  const { stream, lines } = openStream('st-expiry', 1, { credentials: { clientId, accessToken: made.body.accessToken } });
  await assert.rejects(stream.opened, (err: TgsApiError) => err.status === 401 && /expired/.test(err.message));
  assert.ok(lines.some((l) => /refused the worker stream/.test(l)), lines.join('\n'));
});

test('runs claimed as the stream closes are resolved worker-shutdown at once, not left until their claim expires', async () => {
  const [taskId] = await createTasks('st-closing', 1, { retries: 2 });
  // the claim's statement waits on a lock while the worker goes away
  const lock = await t.db.pool.connect();
  try {
    await lock.query('BEGIN');
    await lock.query('LOCK TABLE workers IN ACCESS EXCLUSIVE MODE');
    const { ws } = await rawStream('st-closing');
    ws.send(JSON.stringify({ type: 'capacity', tasks: 1 }));
    await eventually(async () => (await t.db.pool.query(`SELECT count(*)::int AS n FROM pg_locks WHERE NOT granted AND relation = 'workers'::regclass`)).rows[0].n > 0, 'the claim waits on the lock');
    ws.terminate();
    await eventually(async () => (await registry.getSingleMetric('tgs_worker_streams')!.get()).values[0].value === 0, 'the API saw the stream close');
    await lock.query('COMMIT');
  } finally {
    lock.release();
  }
  await eventually(async () => (await status(taskId)).runs.length === 2, 'a second run');
  const { runs, state } = await status(taskId);
  assert.equal(runs[0].state, 'exception');
  assert.equal(runs[0].reasonResolved, 'worker-shutdown');
  assert.equal(state, 'pending', 'retried now');
});

test('the API stopping drains its streams at once: the worker is told and goes elsewhere', async () => {
  const { stream, lines } = openStream('st-stop', 2);
  await stream.opened;
  const open = async () => (await registry.getSingleMetric('tgs_worker_streams')!.get()).values[0].value;
  assert.equal(await open(), 1);
  const started = Date.now();
  const closing = t.close();
  // (the API's stop itself goes on: without Temporal here its hook sweep waits for a connection)
  await eventually(async () => (await open()) === 0, 'the stream closed');
  assert.ok(Date.now() - started < 2000, `the stream drained in ${Date.now() - started} ms`);
  // the worker opens a stream again at once, and is refused by the stopping API (503): it says so once
  await eventually(async () => lines.some((l) => /stopping/.test(l)), 'the worker was told');
  await closing;
  await stream.close();
  assert.equal(lines.length, 1, lines.join('\n'));
  // after() closes again: a no-op
  t.close = async () => undefined;
});
