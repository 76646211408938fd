import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import amqp from 'amqplib';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { eventually } from '../../support/stack.js';
import type { ClaimedTask } from '../../support/fastWorker.js';
import { useStack } from '../helpers/stackFixture.js';
import { fastTask } from '../../support/graphs.js';
import type { CacheExplanation } from '../../src/taskCache/explain.js';

/*
 * Cached graph nodes on the real stack (docs/formats.md § Cached tasks). Two tiers, `high` above `low`. The worker
 * records every claim; `toolchain` uploads a public and a private artifact whose bytes name the task that made them,
 * `build` downloads the public one through the taskId its payload names (its dependency in its own graph).
 */
const claimed: string[] = [];
/** build's taskId → the bytes it downloaded from its toolchain */
const downloads = new Map<string, string>();
const openConnections = new Set<{ close(): Promise<void> }>();

const hourFromNow = (h: number) => new Date(Date.now() + h * 3600_000).toISOString();

async function upload(taskId: string, runId: number, name: string, bytes: string, expiresH = 24) {
  const res = await stack.api.request('POST', `/api/queue/v1/task/${taskId}/runs/${runId}/artifacts/${name}`, { storageType: 's3', contentType: 'text/plain', expires: hourFromNow(expiresH) });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const put = await fetch(res.body.putUrl, { method: 'PUT', body: bytes, headers: { 'content-type': 'text/plain' } });
  assert.ok(put.ok, `upload ${put.status}`);
}

const stack = useStack({
  configOverrides: { cacheTiers: ['high', 'low'] },
  worker: {
    provisionerId: 'tgs-test',
    workerType: 'cache',
    concurrency: 4,
    decide: async (t: ClaimedTask) => {
      claimed.push(t.taskId);
      const payload = t.task.payload;
      if (payload.kind === 'toolchain') {
        await upload(t.taskId, t.runId, 'public/tool.txt', `tool made by ${t.taskId}`);
        // `secretExpiresH`: the private artifact expires that many hours from now, maybe before the task and its readers' deadlines
        await upload(t.taskId, t.runId, 'private/secret.txt', `secret of ${t.taskId}`, (payload.secretExpiresH as number | undefined) ?? 24);
      }
      if (payload.kind === 'build') {
        const res = await fetch(`${stack.api.rootUrl}/api/queue/v1/task/${payload.toolchain}/artifacts/public/tool.txt`);
        downloads.set(t.taskId, res.ok ? await res.text() : `HTTP ${res.status}`);
      }
      return ((payload.outcomes as string[] | undefined)?.[t.runId] ?? 'completed') as 'completed' | 'failed';
    },
  },
});
stack.onStop(async () => {
  await Promise.all([...openConnections].map((c) => c.close().catch(() => undefined)));
});

const cacheTask = (name: string, payload: Record<string, unknown>) => ({ ...fastTask(name, ['completed'], payload), workerType: 'cache' });

/** toolchain (cached) → build (not cached, downloads toolchain's artifact). */
function toolGraph(options: { tier?: string; toolPayload?: Record<string, unknown>; cacheMode?: string; maxAge?: number | string } = {}) {
  return {
    ...(options.cacheMode ? { cacheMode: options.cacheMode } : {}),
    tasks: {
      toolchain: {
        cache: { name: 'toolchain', ...(options.tier ? { tier: options.tier } : {}), digestData: { version: 1 }, ...(options.maxAge !== undefined ? { maxAge: options.maxAge } : {}) },
        task: cacheTask('toolchain', { kind: 'toolchain', ...options.toolPayload }),
      },
      build: { requires: ['toolchain'], task: cacheTask('build', { kind: 'build', toolchain: { $subs: 'taskId:toolchain' } }) },
    },
  };
}

interface Submitted {
  taskGraphId: string;
  id: (label: string) => string;
}

async function submit(graph: unknown, taskGraphId = slugid.nice()): Promise<Submitted> {
  const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, graph);
  return { taskGraphId, id: (label) => res.tasks.find((t) => t.label === label)!.taskId };
}

const graphState = async (id: string) => (await stack.root.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${id}/status`)).status.state;
const finished = (id: string) => eventually(async () => (await graphState(id)) === 'finished', `graph ${id} finished`, 60_000);
const status = async (taskId: string) => (await stack.root.request<{ status: { state: string; runs: any[] } }>('queue', 'GET', `/task/${taskId}/status`)).status;
const why = (g: Submitted, label: string, compareTo?: string) =>
  stack.root.request<CacheExplanation>('scheduler', 'GET', `/task-graph/${g.taskGraphId}/cache/${label}${compareTo ? `?compareTo=${compareTo}` : ''}`);
/** The entry a completion wrote, once the relay has indexed it. */
const entryAt = (path: string) =>
  eventually(async () => {
    const res = await stack.api.request('GET', `/api/index/v1/task/${path}`, undefined, null);
    return res.status === 200 ? (res.body as { taskId: string }) : undefined;
  }, `index entry ${path}`, 30_000);

/** The messages of one graph's tasks, bound as a consumer would bind (docs/formats.md § Exchanges). */
async function watchGraph(taskGraphId: string) {
  const conn = await amqp.connect(stack.config.amqpUrl);
  openConnections.add(conn);
  const ch = await conn.createChannel();
  const { queue } = await ch.assertQueue('', { exclusive: true, autoDelete: true });
  const messages: { exchange: string; routingKey: string; body: any }[] = [];
  const prefix = stack.config.exchangePrefix;
  for (const ex of ['queue/v1/task-pending', 'queue/v1/task-running', 'queue/v1/task-completed']) {
    await ch.assertExchange(prefix + ex, 'topic', { durable: true });
    await ch.bindQueue(queue, prefix + ex, `*.*.*.*.*.*.${stack.config.schedulerId}.${taskGraphId}.#`);
  }
  await ch.consume(queue, (m) => {
    if (m) messages.push({ exchange: m.fields.exchange.slice(prefix.length), routingKey: m.fields.routingKey, body: JSON.parse(m.content.toString()) });
  }, { noAck: true });
  return messages;
}

let g1: Submitted;
let g2Reused: Submitted;
let toolKey: string;

test('G1 runs its cached toolchain and its build; an identical G2 reuses the toolchain with zero claims, its build reads G1\'s bytes, and the stream shows an ordinary completion', async () => {
  g1 = await submit(toolGraph());
  await finished(g1.taskGraphId);
  assert.ok(claimed.includes(g1.id('toolchain')) && claimed.includes(g1.id('build')));
  const w1 = await why(g1, 'toolchain');
  toolKey = w1.key;
  assert.match(toolKey, /^[0-9a-f]{64}$/);
  assert.equal(w1.tier, 'low', 'a node without tier is in the lowest');
  assert.deepEqual(w1.lookup?.map((l) => [l.tier, l.result]), [['high', 'miss'], ['low', 'miss']]);
  assert.equal((await entryAt(`tgs.cache.low.toolchain.${toolKey}`)).taskId, g1.id('toolchain'));

  const g2Id = slugid.nice();
  const messages = await watchGraph(g2Id);
  const g2 = await submit(toolGraph(), g2Id);
  g2Reused = g2;
  await finished(g2.taskGraphId);
  assert.ok(!claimed.includes(g2.id('toolchain')), 'no worker claimed the reused toolchain');
  assert.ok(claimed.includes(g2.id('build')), 'the build ran');
  const tool = await status(g2.id('toolchain'));
  assert.equal(tool.state, 'completed');
  assert.equal(tool.runs.length, 1);
  assert.deepEqual(tool.runs[0].cachedFrom, { taskId: g1.id('toolchain'), runId: 0, key: toolKey, tier: 'low' });
  assert.equal(tool.runs[0].workerGroup, 'tgs-cache');
  assert.equal(tool.runs[0].workerId, g1.id('toolchain'));
  assert.equal(downloads.get(g2.id('build')), `tool made by ${g1.id('toolchain')}`, "the build read G1's bytes through the hit");

  // the stream: an ordinary task-completed for the hit, and neither pending nor running
  await eventually(async () => messages.some((m) => m.exchange === 'queue/v1/task-completed' && m.body.status.taskId === g2.id('build')), 'build completion message');
  const ofTool = messages.filter((m) => m.body.status.taskId === g2.id('toolchain'));
  assert.deepEqual(ofTool.map((m) => m.exchange), ['queue/v1/task-completed']);
  assert.equal(ofTool[0].body.workerGroup, 'tgs-cache');
  assert.equal(ofTool[0].body.runId, 0);
  assert.ok(ofTool[0].routingKey.startsWith(`${g2.id('toolchain')}.0.tgs-cache.${g1.id('toolchain')}.`));

  const w2 = await why(g2, 'toolchain');
  assert.equal(w2.key, toolKey);
  assert.deepEqual(w2.cachedFrom?.taskId, g1.id('toolchain'));
  assert.match(w2.summary, /reused task/);
  // the hit wrote no entry of its own: the entry still names G1's toolchain
  assert.equal((await entryAt(`tgs.cache.low.toolchain.${toolKey}`)).taskId, g1.id('toolchain'));

  // artifacts through the hit: the source's bytes with the source's read rules
  const anonymous = await stack.api.request('GET', `/api/queue/v1/task/${g2.id('toolchain')}/artifacts/private/secret.txt`, undefined, null);
  assert.equal(anonymous.status, 403, 'a private artifact stays private through the hit (no credentials: the anonymous role, 403)');
  const asRoot = await stack.api.request('GET', `/api/queue/v1/task/${g2.id('toolchain')}/runs/0/artifacts/private/secret.txt`);
  assert.equal(asRoot.status, 303);
  assert.equal(await (await fetch(asRoot.headers.get('location')!)).text(), `secret of ${g1.id('toolchain')}`);
  const listed = await stack.api.request('GET', `/api/queue/v1/task/${g2.id('toolchain')}/runs/0/artifacts`);
  assert.deepEqual(listed.body.artifacts.map((a: { name: string }) => a.name), ['private/secret.txt', 'public/tool.txt']);
});

test('one changed payload byte misses and `why` names the payload and where in it', async () => {
  const g3 = await submit(toolGraph({ toolPayload: { flags: 'O2' } }));
  await finished(g3.taskGraphId);
  assert.ok(claimed.includes(g3.id('toolchain')), 'the changed toolchain ran');
  const w = await why(g3, 'toolchain', g1.id('toolchain'));
  assert.notEqual(w.key, toolKey);
  assert.deepEqual(w.comparedTo?.differing, ['payload']);
  assert.deepEqual(w.comparedTo?.payloadPaths, ['/flags']);
  assert.deepEqual(w.lookup?.map((l) => l.result), ['miss', 'miss']);
  // and the CLI-facing summary says it ran
  assert.match(w.summary, /^ran: no tier held a usable entry/);
});

test('tiers: a higher tier never reuses a lower tier\'s entry; a lower tier reuses the highest it can reach', async () => {
  const payload = { flags: 'tiers' };
  const low1 = await submit(toolGraph({ toolPayload: payload }));
  await finished(low1.taskGraphId);
  const high = await submit(toolGraph({ toolPayload: payload, tier: 'high' }));
  await finished(high.taskGraphId);
  assert.ok(claimed.includes(high.id('toolchain')), 'the high tier ran although the low tier held the same key');
  const wHigh = await why(high, 'toolchain');
  assert.deepEqual(wHigh.lookup?.map((l) => [l.tier, l.result]), [['high', 'miss']], 'a high node looks in high only');
  const key = wHigh.key;
  assert.equal((await entryAt(`tgs.cache.high.toolchain.${key}`)).taskId, high.id('toolchain'));
  const low2 = await submit(toolGraph({ toolPayload: payload }));
  await finished(low2.taskGraphId);
  assert.ok(!claimed.includes(low2.id('toolchain')));
  const t = await status(low2.id('toolchain'));
  assert.deepEqual(t.runs[0].cachedFrom, { taskId: high.id('toolchain'), runId: 0, key, tier: 'high' }, 'the highest hit is taken');
  const wLow = await why(low2, 'toolchain');
  assert.deepEqual(wLow.lookup?.map((l) => [l.tier, l.result]), [['high', 'hit'], ['low', 'hit']]);
});

test('a failed source, a source expiring before the deadline and an entry older than maxAge are never reused', async () => {
  const payload = { flags: 'sources' };
  const first = await submit(toolGraph({ toolPayload: payload }));
  await finished(first.taskGraphId);
  const key = (await why(first, 'toolchain')).key;
  const path = `tgs.cache.low.toolchain.${key}`;
  await entryAt(path);

  // the source's latest run failed (a rerun after it completed)
  const failing = await submit({ tasks: { f: { task: cacheTask('failing', { outcomes: ['failed'] }) } } });
  await eventually(async () => (await status(failing.id('f'))).state === 'failed', 'f failed');
  let res = await stack.api.request('PUT', `/api/index/v1/task/${path}`, { taskId: failing.id('f'), rank: 0, data: {}, expires: hourFromNow(24) });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const g = await submit(toolGraph({ toolPayload: payload }));
  await finished(g.taskGraphId);
  assert.ok(claimed.includes(g.id('toolchain')), 'ran instead of reusing a failed task');
  assert.deepEqual((await why(g, 'toolchain')).lookup?.find((l) => l.tier === 'low'), { tier: 'low', result: 'source-failed', taskId: failing.id('f') });

  // a source whose task expires before this graph's deadline
  const shortLived = await submit({ tasks: { s: { task: { ...cacheTask('short', {}), deadline: hourFromNow(0.5), expires: hourFromNow(0.75) } } } });
  await eventually(async () => (await status(shortLived.id('s'))).state === 'completed', 's completed');
  res = await stack.api.request('PUT', `/api/index/v1/task/${path}`, { taskId: shortLived.id('s'), rank: 0, data: {}, expires: hourFromNow(0.75) });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  const g2 = await submit(toolGraph({ toolPayload: payload }));
  await finished(g2.taskGraphId);
  assert.ok(claimed.includes(g2.id('toolchain')), 'ran instead of reusing a soon-expiring task');
  assert.equal((await why(g2, 'toolchain')).lookup?.find((l) => l.tier === 'low')?.result, 'expires-before-deadline');

  // g2's completion wrote a fresh entry; a maxAge of 0 seconds finds it too old
  await eventually(async () => (await entryAt(path)).taskId === g2.id('toolchain'), 'entry of g2');
  const g3 = await submit(toolGraph({ toolPayload: payload, maxAge: 0 }));
  await finished(g3.taskGraphId);
  assert.ok(claimed.includes(g3.id('toolchain')));
  assert.equal((await why(g3, 'toolchain')).lookup?.find((l) => l.tier === 'low')?.result, 'expired');
});

test('a source whose task outlives the deadline but one of whose artifacts expires before it is never reused (artifact-expires)', async () => {
  // the private artifact expires in 45 minutes, the graph's deadline is in an hour: a hit would hand build a
  // toolchain whose artifact the expiry sweep deletes while build may still run
  const payload = { flags: 'artifact-expiry', secretExpiresH: 0.75 };
  const first = await submit(toolGraph({ toolPayload: payload }));
  await finished(first.taskGraphId);
  const key = (await why(first, 'toolchain')).key;
  await entryAt(`tgs.cache.low.toolchain.${key}`);
  const g = await submit(toolGraph({ toolPayload: payload }));
  await finished(g.taskGraphId);
  assert.ok(claimed.includes(g.id('toolchain')), 'ran instead of reusing a run whose artifact expires before the deadline');
  assert.equal((await status(g.id('toolchain'))).runs[0].cachedFrom, undefined);
  const w = await why(g, 'toolchain');
  assert.deepEqual(w.lookup?.find((l) => l.tier === 'low'), { tier: 'low', result: 'artifact-expires', taskId: first.id('toolchain') });
  assert.match(w.summary, /low: artifact-expires/);
  // what a lookup would find now says the same of the entry (g's own completion wrote one with the same short artifact)
  assert.equal(w.now.find((l) => l.tier === 'low')?.result, 'artifact-expires');
});

test('cacheMode refresh runs and overwrites, off neither looks up nor writes; purge removes an entry so the next lookup misses', async () => {
  const payload = { flags: 'modes' };
  const first = await submit(toolGraph({ toolPayload: payload }));
  await finished(first.taskGraphId);
  const key = (await why(first, 'toolchain')).key;
  const path = `tgs.cache.low.toolchain.${key}`;
  await entryAt(path);

  const refreshed = await submit(toolGraph({ toolPayload: payload, cacheMode: 'refresh' }));
  await finished(refreshed.taskGraphId);
  assert.ok(claimed.includes(refreshed.id('toolchain')));
  await eventually(async () => (await entryAt(path)).taskId === refreshed.id('toolchain'), 'refresh overwrote the entry');

  const off = await submit(toolGraph({ toolPayload: payload, cacheMode: 'off' }));
  await finished(off.taskGraphId);
  assert.ok(claimed.includes(off.id('toolchain')));
  const wOff = await why(off, 'toolchain');
  assert.equal(wOff.mode, 'off');
  assert.equal(wOff.lookup, undefined);
  const offTask = await stack.root.request<{ routes: string[] }>('queue', 'GET', `/task/${off.id('toolchain')}`);
  assert.deepEqual(offTask.routes, [], 'mode off writes no entry');

  const listed = await stack.api.request('GET', '/api/scheduler/v1/cache/low/toolchain', undefined, null);
  assert.equal(listed.status, 200);
  assert.ok(listed.body.entries.some((e: { key: string }) => e.key === key));
  const refused = await stack.api.request('DELETE', `/api/scheduler/v1/cache/low/toolchain/${key}`, undefined, null);
  assert.equal(refused.status, 403, 'purging needs its scope');
  const purged = await stack.api.request('DELETE', `/api/scheduler/v1/cache/low/toolchain/${key}`);
  assert.deepEqual(purged.body, { purged: 1 });
  const after = await submit(toolGraph({ toolPayload: payload }));
  await finished(after.taskGraphId);
  assert.ok(claimed.includes(after.id('toolchain')), 'a purged entry is not reused');
  const all = await stack.api.request('DELETE', '/api/scheduler/v1/cache/low/toolchain');
  assert.equal(all.status, 200);
  assert.ok(all.body.purged >= 1);
});

test('a cached node whose dependency is not cached is refused at submit, naming both labels; so is an unknown tier; writing a tier needs its route scope', async () => {
  const bad = await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${slugid.nice()}`, {
    tasks: {
      plain: { task: cacheTask('plain', {}) },
      cached: { requires: ['plain'], cache: { name: 'x' }, task: cacheTask('cached', {}) },
      named: { cache: { name: 'z' }, task: cacheTask('named', { tool: { $subs: 'taskId:plain' } }) },
    },
  });
  assert.equal(bad.status, 400);
  assert.match(bad.body.message, /- cached: is cached and requires "plain", which is not/);
  assert.match(bad.body.message, /- named: is cached and names in a \$subs "plain", which is not/);
  const tiered = await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${slugid.nice()}`, { tasks: { tiered: { cache: { name: 'y', tier: 'nope' }, task: cacheTask('tiered', {}) } } });
  assert.equal(tiered.status, 400);
  assert.match(tiered.body.message, /tiered: cache\.tier "nope" is not a tier of this deployment/);
  const { rows } = await stack.api.db.pool.query('SELECT count(*)::int AS n FROM task_cache WHERE label IN ($1, $2, $3)', ['cached', 'named', 'tiered']);
  assert.equal(rows[0].n, 0, 'nothing written');

  // a client that may create graphs and tasks, with the low tier's route scope only
  const clientId = `cache-writer-${slugid.nice()}`;
  const created = await stack.root.request<{ accessToken: string }>('auth', 'PUT', `/clients/${encodeURIComponent(clientId)}`, {
    description: 'writes the low tier only',
    expires: hourFromNow(1),
    scopes: ['scheduler:create-task-graph', 'queue:create-task:*', 'queue:scheduler-id:*', 'queue:route:index.tgs.cache.low.*'],
  });
  const creds = { clientId, accessToken: created.accessToken };
  const low = await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${slugid.nice()}`, toolGraph({ toolPayload: { flags: 'scopes' } }), creds);
  assert.equal(low.status, 200, JSON.stringify(low.body));
  const high = await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${slugid.nice()}`, toolGraph({ toolPayload: { flags: 'scopes' }, tier: 'high' }), creds);
  assert.equal(high.status, 403);
  assert.match(JSON.stringify(high.body), /queue:route:index\.tgs\.cache\.high\.toolchain\./);
});

/** The `tgs` CLI as a user runs it, with root credentials from the environment. */
async function tgs(...args: string[]): Promise<string> {
  const env = { ...process.env, TGS_ROOT_URL: stack.api.rootUrl, TGS_CLIENT_ID: stack.api.root.clientId, TGS_ACCESS_TOKEN: stack.api.root.accessToken };
  return (await promisify(execFile)(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', ...args], { env })).stdout;
}

test('the CLI: `tgs cache why` prints the key and where the run came from, by taskId or by label; `tgs task status` names the source', async () => {
  const byId = await tgs('cache', 'why', g2Reused.id('toolchain'));
  assert.match(byId, new RegExp(`^toolchain \\(${g2Reused.id('toolchain')}\\): reused task ${g1.id('toolchain')} run 0 from tier low`));
  assert.match(byId, new RegExp(`key +${toolKey}`));
  const byLabel = await tgs('cache', 'why', 'toolchain', '--graph', g2Reused.taskGraphId, '--compare', g1.id('toolchain'));
  assert.match(byLabel, /compared with .*: the same key/);
  const status = await tgs('task', 'status', g2Reused.id('toolchain'));
  assert.match(status, new RegExp(`run 0 +completed from the cache: task ${g1.id('toolchain')} run 0 \\(tier low\\)`));
  // the tests before purged and rewrote entries: the CLI lists what the API lists
  const listed = await tgs('cache', 'list', 'low', 'toolchain');
  const api = await stack.root.request<{ entries: { key: string; taskId: string; expires: string }[] }>('scheduler', 'GET', '/cache/low/toolchain');
  assert.ok(api.entries.length > 0);
  assert.equal(listed, api.entries.map((e) => `${e.key}  ${e.taskId}  expires ${e.expires}\n`).join(''));
});

test('security review 2026-11-28 #7: a payload holding a dependency\'s key as text gets its own key, and a rank in `extra.index` neither pins an entry nor outlasts `refresh`', async () => {
  const payload = { flags: 'poison' };
  const dep = await submit(toolGraph({ toolPayload: payload }));
  await finished(dep.taskGraphId);
  const depKey = (await why(dep, 'toolchain')).key;
  // the review's graph: `use` names the dependency's key literally where the genuine graph has the $subs, rank 1e9
  const useNode = (toolchain: unknown, extra: Record<string, unknown> = {}) => ({
    requires: ['toolchain'],
    cache: { name: 'use' },
    task: { ...cacheTask('use', { kind: 'use', toolchain }), extra },
  });
  const graph = (toolchain: unknown, extra: Record<string, unknown> = {}, cacheMode?: string) => ({
    ...(cacheMode ? { cacheMode } : {}),
    tasks: { toolchain: toolGraph({ toolPayload: payload }).tasks.toolchain, use: useNode(toolchain, extra) },
  });
  const poisoned = await submit(graph(`cache-key:${depKey}`, { index: { rank: 1e9 } }));
  await finished(poisoned.taskGraphId);
  const genuine = await submit(graph({ $subs: 'taskId:toolchain' }));
  await finished(genuine.taskGraphId);
  const genuineKey = (await why(genuine, 'use')).key;
  assert.notEqual(genuineKey, (await why(poisoned, 'use')).key, 'the literal text does not stand for the key');
  assert.ok(claimed.includes(genuine.id('use')), 'the genuine node ran instead of reusing the forged one');

  // the same key completed with a huge rank first: the entry's rank is fixed, and refresh overwrites it
  const path = `tgs.cache.low.use.${genuineKey}`;
  const ranked = await submit(graph({ $subs: 'taskId:toolchain' }, { index: { rank: 1e9 } }, 'refresh'));
  await finished(ranked.taskGraphId);
  const entry = await eventually(async () => {
    const e = (await stack.api.request('GET', `/api/index/v1/task/${path}`, undefined, null)).body as { taskId: string; rank: number };
    return e.taskId === ranked.id('use') && e;
  }, 'the ranked completion indexed');
  assert.equal(entry.rank, 0, 'extra.index.rank is ignored under tgs.cache.');
  const refreshed = await submit(graph({ $subs: 'taskId:toolchain' }, {}, 'refresh'));
  await finished(refreshed.taskGraphId);
  await eventually(async () => (await entryAt(path)).taskId === refreshed.id('use'), 'refresh overwrote the entry');
});
