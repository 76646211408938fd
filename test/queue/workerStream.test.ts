import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import WebSocket, { WebSocketServer } from 'ws';
import { startTestApi, hawkHeader, type Credentials, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { eventually } from '../../support/stack.js';
import type { AddressInfo } from 'node:net';
import { WorkerStream, type CanceledRun, type StreamClaim } from '../../src/client/workerStream.js';
import { MAX_NOTIFY_PAYLOAD, parseRunsResolved, runsResolvedPayloads } from '../../src/queue/notify.js';
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
  const canceled: CanceledRun[] = [];
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
    onCanceled: (run) => canceled.push(run),
    log: (line) => lines.push(line),
  });
  return { stream, claims, canceled, lines };
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

test('a cancel reaches the stream holding the run at once (canceled frame), only that stream; a sweep\'s deadline-exceeded too; a reported run is not told', async () => {
  const [a, b, reported] = await createTasks('st-cancel', 3);
  const [late] = await createTasks('st-cancel', 1, { deadline: new Date(Date.now() + 4000).toISOString() });
  const one = openStream('st-cancel', 2, { workerId: 'c1' });
  const two = openStream('st-cancel', 2, { workerId: 'c2' });
  try {
    await eventually(async () => one.claims.length + two.claims.length === 4, 'four claims');
    const holder = (taskId: string) => (one.claims.some((c) => c.status.taskId === taskId) ? one : two);
    const other = (taskId: string) => (holder(taskId) === one ? two : one);
    // `reported` is reported first: a cancel of it afterwards resolves nothing and tells nobody
    await holder(reported).stream.resolve([{ taskId: reported, runId: 0, outcome: 'completed' }]);
    const started = Date.now();
    const res = await t.request('POST', `/api/queue/v1/task/${a}/cancel`);
    assert.equal(res.status, 200, JSON.stringify(res.body));
    await eventually(async () => holder(a).canceled.length === 1, 'the canceled frame');
    const took = Date.now() - started;
    assert.deepEqual(holder(a).canceled, [{ taskId: a, runId: 0, reasonResolved: 'canceled' }]);
    assert.ok(took < 2000, `told ${took} ms after the cancel began`);
    assert.deepEqual(other(a).canceled, [], 'the other stream holds no such run');
    await t.request('POST', `/api/queue/v1/task/${reported}/cancel`);
    // the deadline sweep resolves `late` exception deadline-exceeded: its holder is told too
    await eventually(async () => holder(late).canceled.some((r) => r.taskId === late), 'deadline-exceeded told', 15_000);
    assert.equal(holder(late).canceled.find((r) => r.taskId === late)?.reasonResolved, 'deadline-exceeded');
    for (const s of [one, two]) assert.ok(!s.canceled.some((r) => r.taskId === reported || r.taskId === b), 'nothing of reported or untouched runs');
    assert.equal((await status(b)).state, 'running');
  } finally {
    await Promise.all([one.stream.close(), two.stream.close()]);
  }
});

test('a cancel heard just before the stream held its run (between the claim\'s commit and its push) is told as the run is pushed', async () => {
  const [taskId] = await createTasks('st-window', 1);
  // the notification a cancel racing the claim sends, heard before any stream holds the run
  await t.db.pool.query(`SELECT pg_notify('tgs_run_resolved', $1)`, [`${taskId}/0/canceled`]);
  await new Promise((r) => setTimeout(r, 300));
  const { stream, claims, canceled } = openStream('st-window', 1, { workerId: 'win' });
  try {
    await eventually(async () => claims.length === 1, 'claimed');
    await eventually(async () => canceled.length === 1, 'told at the push');
    assert.deepEqual(canceled, [{ taskId, runId: 0, reasonResolved: 'canceled' }]);
  } finally {
    await stream.close();
  }
});

test('a cancel reaches a run given on a stream that drained since: the worker names the runs it holds on its next stream (holding frame)', async () => {
  const [taskId] = await createTasks('st-held', 1);
  const { stream, claims, canceled } = openStream('st-held', 1, { workerId: 'h1' });
  try {
    await eventually(async () => claims.length === 1, 'claimed');
    // streams drain every 2 s here: wait for two, so the run was given on a stream that is gone
    await new Promise((r) => setTimeout(r, 4500));
    assert.equal(canceled.length, 0);
    assert.equal((await t.request('POST', `/api/queue/v1/task/${taskId}/cancel`)).status, 200);
    await eventually(async () => canceled.length === 1, 'the canceled frame on the new stream');
    assert.deepEqual(canceled, [{ taskId, runId: 0, reasonResolved: 'canceled' }]);
  } finally {
    await stream.close();
  }
});

test('a holding frame naming another worker\'s run (or a made-up one) earns no canceled frame; a malformed one ends the stream', async () => {
  const [taskId] = await createTasks('st-hostile', 1);
  const { claims, stream } = openStream('st-hostile', 1, { workerId: 'owner' });
  try {
    await eventually(async () => claims.length === 1, 'claimed by the owner');
    const raw = await rawStream('st-hostile');
    raw.ws.send(JSON.stringify({ type: 'holding', runs: [{ taskId, runId: 0 }, { taskId: slugid.nice(), runId: 3 }] }));
    await new Promise((r) => setTimeout(r, 300));
    assert.equal((await t.request('POST', `/api/queue/v1/task/${taskId}/cancel`)).status, 200);
    await new Promise((r) => setTimeout(r, 1000));
    assert.deepEqual(raw.frames.filter((f) => f.type === 'canceled'), [], 'the raw stream holds none of these runs');
    raw.ws.send(JSON.stringify({ type: 'holding', runs: [{ taskId: 'not-a-slugid', runId: 0 }] }));
    assert.equal((await raw.closed).code, CLOSE.protocolError);
  } finally {
    await stream.close();
  }
});

test('the client acts on a canceled frame only for runs it was given and has not reported, once', async () => {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  const given = { taskId: slugid.nice(), runId: 0 };
  const reportedRun = { taskId: slugid.nice(), runId: 1 };
  server.on('connection', (ws) => {
    ws.send(JSON.stringify({ type: 'welcome' }));
    const claim = (r: { taskId: string; runId: number }) => ({ status: { taskId: r.taskId, taskGroupId: r.taskId }, runId: r.runId, workerGroup: 'g', workerId: 'w', takenUntil: new Date().toISOString(), task: { payload: {} }, credentials: { clientId: 'x', accessToken: 'y' } });
    ws.send(JSON.stringify({ type: 'claimed', tasks: [claim(given), claim(reportedRun)] }));
    ws.on('message', (data) => {
      const frame = JSON.parse(String(data));
      if (frame.type !== 'resolve') return;
      ws.send(JSON.stringify({ type: 'resolved', id: frame.id, resolutions: [] }));
      const twice = { type: 'canceled', runs: [{ taskId: given.taskId, runId: 0, reasonResolved: 'canceled' }, { taskId: given.taskId, runId: 0, reasonResolved: 'canceled' }] };
      ws.send(JSON.stringify({ type: 'canceled', runs: [{ taskId: slugid.nice(), runId: 0, reasonResolved: 'canceled' }, { taskId: given.taskId, runId: 1, reasonResolved: 'canceled' }, reportedRun, 'junk', null] }));
      ws.send(JSON.stringify({ type: 'canceled', runs: 'not a list' }));
      ws.send(JSON.stringify(twice));
      ws.send(JSON.stringify(twice));
      ws.send(JSON.stringify({ type: 'canceled', runs: [{ ...reportedRun, reasonResolved: 'canceled' }] }));
    });
  });
  await new Promise((r) => server.once('listening', r));
  const canceled: CanceledRun[] = [];
  const claims: StreamClaim[] = [];
  const stream = new WorkerStream({
    rootUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    provisionerId: 'p',
    workerType: 't',
    workerGroup: 'g',
    workerId: 'w',
    capacity: 2,
    onClaim: (c) => claims.push(c),
    onCanceled: (r) => canceled.push(r),
    log: () => undefined,
  });
  try {
    await eventually(async () => claims.length === 2, 'two claims');
    await stream.resolve([{ taskId: reportedRun.taskId, runId: reportedRun.runId, outcome: 'completed' }]);
    await new Promise((r) => setTimeout(r, 300));
    assert.deepEqual(canceled, [{ taskId: given.taskId, runId: 0, reasonResolved: 'canceled' }]);
  } finally {
    await stream.close();
    server.close();
  }
});

test('the client names the runs it holds on a new stream only to an API whose welcome says it takes holding frames', async () => {
  const server = new WebSocketServer({ port: 0, host: '127.0.0.1' });
  const run = { taskId: slugid.nice(), runId: 2 };
  const received: { conn: number; type: string; runs?: unknown }[] = [];
  let conns = 0;
  server.on('connection', (ws) => {
    const conn = ++conns;
    ws.on('message', (data) => received.push({ conn, ...JSON.parse(String(data)) }));
    // the first two as an older API (no `holding` in the welcome), the third as this one
    ws.send(JSON.stringify({ type: 'welcome', ...(conn === 3 ? { holding: true } : {}) }));
    if (conn === 1) {
      ws.send(JSON.stringify({ type: 'claimed', tasks: [{ status: { taskId: run.taskId, taskGroupId: run.taskId }, runId: run.runId, workerGroup: 'g', workerId: 'w', takenUntil: new Date().toISOString(), task: { payload: {} }, credentials: { clientId: 'x', accessToken: 'y' } }] }));
    }
    if (conn < 3) setTimeout(() => ws.send(JSON.stringify({ type: 'draining', reason: 'test' })), 200);
  });
  await new Promise((r) => server.once('listening', r));
  const stream = new WorkerStream({
    rootUrl: `http://127.0.0.1:${(server.address() as AddressInfo).port}`,
    provisionerId: 'p',
    workerType: 't',
    workerGroup: 'g',
    workerId: 'w',
    capacity: 1,
    onClaim: () => undefined,
    log: () => undefined,
  });
  try {
    await eventually(async () => received.some((f) => f.type === 'holding'), 'a holding frame', 5000);
    assert.deepEqual(received.filter((f) => f.type === 'holding'), [{ conn: 3, type: 'holding', runs: [run] }], 'on the third stream only');
  } finally {
    await stream.close();
    server.close();
  }
});

test('resolved-run notifications: chunked under Postgres\' 8000-byte payload limit, every run once, and read back; junk entries skipped', () => {
  const runs = Array.from({ length: 2000 }, (_, i) => ({ taskId: slugid.nice(), runId: i % 50, reasonResolved: i % 3 ? 'canceled' : 'deadline-exceeded' }));
  const payloads = runsResolvedPayloads(runs);
  const bytes = runs.reduce((n, r) => n + Buffer.byteLength(`${r.taskId}/${r.runId}/${r.reasonResolved}`) + 1, 0);
  // as few as fit: each full but the last
  assert.ok(payloads.length >= 2 && payloads.length <= Math.ceil(bytes / (MAX_NOTIFY_PAYLOAD - 50)), `${payloads.length} payloads for 2000 runs (${bytes} bytes)`);
  for (const p of payloads) assert.ok(Buffer.byteLength(p) <= MAX_NOTIFY_PAYLOAD && MAX_NOTIFY_PAYLOAD < 8000, `${Buffer.byteLength(p)} bytes`);
  assert.deepEqual(payloads.flatMap(parseRunsResolved), runs);
  assert.deepEqual(runsResolvedPayloads([]), []);
  assert.deepEqual(parseRunsResolved(`x ${runs[0].taskId}/0/canceled ;DROP/1/x a/b/c ${runs[1].taskId}/9999999/canceled`), [{ taskId: runs[0].taskId, runId: 0, reasonResolved: 'canceled' }]);
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
