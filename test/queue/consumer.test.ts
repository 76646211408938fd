import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import amqp, { type Channel, type ChannelModel } from 'amqplib';
import slugid from 'slugid';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { eventually } from '../../support/stack.js';
import { startRelay } from '../../src/relay/relay.js';
import { allExchangeNames, queueExchangeName, queueExchanges } from '../../src/exchanges/exchanges.js';
import { declareExchanges } from '../../src/exchanges/declare.js';

// Taskcluster's classic consumers (a provisioner, a long-polling worker, a cancellation-aware worker, a worker
// group, a dependent-task scheduler), bound with the patterns of docs/formats.md § Queue exchanges, watch one scripted task group's life.
const prefix = `test-consumer-${randomBytes(4).toString('hex')}/`;
const provisionerId = 'consumer-prov';
const schedulerId = 'consumer-sched';
const taskGroupId = slugid.nice();
const routing = 'graph-routing.with.dots';

let t: TestApi;
let relay: Awaited<ReturnType<typeof startRelay>>;
let conn: ChannelModel;
let ch: Channel;

interface Received {
  exchange: string;
  routingKey: string;
  messageId: string;
  body: any;
}
const queues: Record<string, Received[]> = {};

async function consumer(name: string, bindings: { exchanges: readonly string[]; pattern: string }[]) {
  const { queue } = await ch.assertQueue('', { exclusive: true, autoDelete: true });
  for (const b of bindings) {
    for (const e of b.exchanges) await ch.bindQueue(queue, queueExchangeName(prefix, e as (typeof queueExchanges)[number]), b.pattern);
  }
  const into: Received[] = (queues[name] = []);
  await ch.consume(
    queue,
    (m) => {
      if (!m) return;
      into.push({
        exchange: m.fields.exchange.slice(`${prefix}queue/v1/`.length),
        routingKey: m.fields.routingKey,
        messageId: m.properties.messageId as string,
        body: JSON.parse(m.content.toString('utf8')),
      });
    },
    { noAck: true },
  );
}

before(async () => {
  t = await startTestApi({ exchangePrefix: prefix, claimWorkWaitMs: 1000 });
  conn = await amqp.connect(t.config.amqpUrl);
  ch = await conn.createChannel();
  await declareExchanges(ch, prefix);
  const taskExchanges = queueExchanges.filter((e) => e !== 'task-group-resolved');
  await consumer('provisioner', [{ exchanges: taskExchanges, pattern: `*.*.*.*.${provisionerId}.#` }]);
  await consumer('scheduler', [{ exchanges: queueExchanges, pattern: `*.*.*.*.*.*.${schedulerId}.#` }]);
  await consumer('route', [{ exchanges: queueExchanges, pattern: 'route.notify.by-test' }]);
  await consumer('worker', [{ exchanges: ['task-failed', 'task-exception'], pattern: '*.*.grp.w2.#' }]);
  relay = await startRelay({ temporal: undefined, config: t.config, pool: t.db.pool, log: () => undefined });
});
after(async () => {
  await relay.stop();
  for (const name of allExchangeNames(prefix)) await ch.deleteExchange(name);
  await conn.close();
  await t.close();
});

const q = (method: string, path: string, body?: unknown, creds?: Parameters<TestApi['request']>[3]) => t.request(method, `/api/queue/v1${path}`, body, creds);

async function claim(workerType: string, workerId: string) {
  const res = await q('POST', `/claim-work/${provisionerId}/${workerType}`, { workerGroup: 'grp', workerId, tasks: 1 });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.tasks.length, 1, `a ${workerType} task to claim`);
  return res.body.tasks[0] as { status: { taskId: string }; runId: number; credentials: Parameters<TestApi['request']>[3] };
}

/** At-least-once delivery: a duplicate (same messageId) is allowed, so compare the deduplicated stream. */
function distinct(list: Received[]): Received[] {
  const seen = new Set<string>();
  return list.filter((m) => !seen.has(m.messageId) && seen.add(m.messageId));
}

test('the classic consumers bindings receive exactly the expected messages, routing keys and bodies for a scripted group', async () => {
  const a = slugid.nice();
  const b = slugid.nice();
  const base = { taskGroupId, schedulerId, provisionerId };
  let res = await q('PUT', `/task/${a}`, { ...fastTask('a'), ...base, workerType: 'wa', retries: 2, routes: ['notify.by-test'], routing, tags: { kind: 'a' } });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  res = await q('PUT', `/task/${b}`, { ...fastTask('b'), ...base, workerType: 'wb' });
  assert.equal(res.status, 200, JSON.stringify(res.body));

  let c = await claim('wa', 'w1');
  assert.equal(c.status.taskId, a);
  res = await q('POST', `/task/${a}/runs/0/exception`, { reason: 'intermittent-task' }, c.credentials);
  assert.equal(res.body.status.state, 'pending', 'intermittent-task is retried');
  c = await claim('wa', 'w1');
  assert.equal(c.runId, 1);
  assert.equal((await q('POST', `/task/${a}/runs/1/completed`, undefined, c.credentials)).status, 200);
  c = await claim('wb', 'w2');
  assert.equal(c.status.taskId, b);
  assert.equal((await q('POST', `/task/${b}/runs/0/failed`, undefined, c.credentials)).status, 200);

  const ka = (run: string, worker: string) => `${a}.${run}.${worker}.${provisionerId}.wa.${schedulerId}.${taskGroupId}.${routing}`;
  const kb = (run: string, worker: string) => `${b}.${run}.${worker}.${provisionerId}.wb.${schedulerId}.${taskGroupId}._`;
  const forA = [
    `task-defined ${ka('_', '_._')}`,
    `task-pending ${ka('0', '_._')}`,
    `task-running ${ka('0', 'grp.w1')}`,
    `task-exception ${ka('0', 'grp.w1')}`,
    `task-pending ${ka('1', '_._')}`,
    `task-running ${ka('1', 'grp.w1')}`,
    `task-completed ${ka('1', 'grp.w1')}`,
  ];
  const bDefined = [`task-defined ${kb('_', '_._')}`, `task-pending ${kb('0', '_._')}`];
  const bRun = [`task-running ${kb('0', 'grp.w2')}`, `task-failed ${kb('0', 'grp.w2')}`];
  const groupResolved = `task-group-resolved _._._._._._.${schedulerId}.${taskGroupId}._`;
  // One relay publishes in outbox order, so each queue sees its messages in the order they were written.
  const expected: Record<string, string[]> = {
    provisioner: [forA[0], forA[1], ...bDefined, ...forA.slice(2), ...bRun],
    scheduler: [forA[0], forA[1], ...bDefined, ...forA.slice(2), ...bRun, groupResolved],
    route: forA,
    worker: [bRun[1]],
  };
  const seen = (name: string) => distinct(queues[name]).map((m) => `${m.exchange} ${m.routingKey}`);
  await eventually(async () => Object.keys(expected).every((name) => seen(name).length >= expected[name].length), 'every message', 20_000);
  // anything unexpected would arrive right behind the expected ones
  await new Promise((r) => setTimeout(r, 500));
  for (const name of Object.keys(expected)) assert.deepEqual(seen(name), expected[name], `queue bound for ${name}`);

  for (const m of distinct(queues.scheduler)) {
    assert.ok(m.messageId, 'every message carries a messageId');
    if (m.exchange === 'task-group-resolved') {
      assert.deepEqual(m.body, { taskGroupId, schedulerId });
      continue;
    }
    const [taskId, runId, workerGroup, workerId] = m.routingKey.split('.');
    const { body } = m;
    assert.equal(body.version, 1);
    assert.equal(body.status.taskId, taskId);
    assert.equal(body.status.taskGroupId, taskGroupId);
    assert.equal(body.status.schedulerId, schedulerId);
    if (m.exchange === 'task-defined') {
      assert.equal(body.runId, undefined);
      assert.equal(body.status.state, 'pending', 'created without dependencies: already pending when defined');
    } else {
      assert.equal(body.runId, Number(runId));
    }
    if (workerGroup === '_') {
      assert.equal(body.workerGroup, undefined, `${m.exchange} before a claim has no worker`);
    } else {
      assert.equal(body.workerGroup, workerGroup);
      assert.equal(body.workerId, workerId);
    }
    const run = body.status.runs[body.runId ?? 0];
    const state = { 'task-defined': 'pending', 'task-pending': 'pending', 'task-running': 'running', 'task-completed': 'completed', 'task-failed': 'failed', 'task-exception': 'exception' }[m.exchange as string];
    assert.equal(run.state, state, `${m.exchange}: the run's state`);
    if (m.exchange === 'task-running') assert.ok(Date.parse(body.takenUntil) > Date.now(), 'task-running carries takenUntil');
    if (m.exchange === 'task-exception') assert.equal(run.reasonResolved, 'intermittent-task');
    if (m.exchange === 'task-pending' && body.runId === 1) assert.equal(run.reasonCreated, 'task-retry');
    assert.deepEqual(body.task.tags, taskId === a ? { kind: 'a' } : {});
  }
});
