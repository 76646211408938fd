import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { connectBus, type BusChannel, type BusConnection } from '../../src/exchanges/bus.js';
import { queueExchangeName, schedulerExchangeName, tgsExchangeName } from '../../src/exchanges/exchanges.js';
import { startHookListener, type HookListener } from '../../src/hooks/listener.js';
import { observeHookListener, registry } from '../../src/observability/metrics.js';
import { listenerBindings } from '../../src/hooks/listenerBindings.js';
import { fireIdKey, messageTaskId } from '../../src/hooks/fireTaskId.js';
import { LazyTemporalClient } from '../../src/temporal/connection.js';
import { startFastWorker } from '../../support/fastWorker.js';
import { graphOf, fastTask } from '../../support/graphs.js';
import { eventually, type Stack } from '../../support/stack.js';
import { lastFires, ok, stackWithHookRole } from './hookStack.js';
import { createClient } from '../../src/auth/clients.js';
import { fireHooksForMessage } from '../../src/hooks/messageFire.js';

/*
 * Hooks' bindings on the real stack (RabbitMQ, Postgres, Temporal): the listener's queue is bound to the union of the
 * hooks' bindings and follows their changes; a message fires each hook whose binding takes it, once per message even
 * when it comes twice; a hook bound to task-graph-finished fires when a graph finishes; Taskcluster's denylist rule.
 */

let stack: Stack;
let listener: HookListener;
let temporal: LazyTemporalClient;
let bus: BusConnection;
let publisher: BusChannel;
let worker: ReturnType<typeof startFastWorker>;
const lines: string[] = [];

before(async () => {
  stack = await stackWithHookRole('bound', 'hooks fired by bindings');
  temporal = new LazyTemporalClient(stack.config);
  listener = await startHookListener({ config: stack.config, pool: stack.api.db.pool, temporal, log: (line) => lines.push(line) });
  bus = await connectBus(stack.config.amqpUrl);
  publisher = await bus.createChannel();
  worker = startFastWorker({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'fast' });
});
after(async () => {
  await worker?.stop();
  await listener?.stop();
  await publisher?.deleteQueue(listener.queueName).catch(() => undefined);
  await bus?.close();
  await temporal?.close();
  await stack?.stop();
});

const prefix = () => stack.config.exchangePrefix;
const hookPath = (hookId: string) => `/api/hooks/v1/hooks/bound/${hookId}`;
const metadata = { name: 'bound', description: 'fired by messages', owner: 'hooks@example.com' };

interface Fire {
  taskId: string;
  firedBy: string;
  result: string;
  error: string;
}
async function fires(hookId: string): Promise<Fire[]> {
  const res = await stack.api.request('GET', `${hookPath(hookId)}/last-fires`);
  if (res.status === 404) return [];
  return ok(res).lastFires;
}

/** Waits until the listener's queue is bound exactly as `expected` says for these exchanges (order aside). */
async function boundTo(exchanges: string[], expected: { exchange: string; routingKeyPattern: string }[]) {
  const key = (b: { exchange: string; routingKeyPattern: string }) => `${b.exchange} ${b.routingKeyPattern}`;
  const want = expected.map(key).sort().join('\n');
  await eventually(async () => {
    const now = (await listenerBindings(stack.api.db.pool, listener.queueName)).filter((b) => exchanges.includes(b.exchange));
    return now.map(key).sort().join('\n') === want;
  }, `the listener bound to ${want || 'nothing'} on ${exchanges.join(', ')}`);
}

function publish(exchange: string, routingKey: string, body: unknown, messageId?: string, cc: string[] = []) {
  publisher.publish(exchange, routingKey, Buffer.from(JSON.stringify(body)), { persistent: true, ...(messageId ? { messageId } : {}), ...(cc.length > 0 ? { CC: cc } : {}) });
}

/** A task routing key (docs/formats.md § Queue exchanges) of the pool `<provisionerId>/<workerType>`, scheduler `-`. */
const taskKey = (provisionerId: string, workerType: string) => `${slugid.nice()}.0.g.w.${provisionerId}.${workerType}.-.${slugid.nice()}._`;

test('a binding to an exchange Taskcluster denies (task creation) or to none of this deployment is refused with 400', async () => {
  assert.ok(lines.some((line) => line.includes(`consuming ${listener.queueName}`)), lines.join('\n'));
  for (const exchange of [queueExchangeName(prefix(), 'task-defined'), queueExchangeName(prefix(), 'task-pending'), tgsExchangeName(prefix(), 'dependent-task-defined'), 'exchange/taskcluster-queue/v1/task-completed']) {
    const res = await stack.api.request('PUT', hookPath('denied'), { metadata, task: fastTask('x'), bindings: [{ exchange, routingKeyPattern: '#' }] });
    assert.equal(res.status, 400, exchange);
    assert.equal(res.body.code, 'InputError');
    assert.match(res.body.message, /exchanges below have been denied access to hooks/);
  }
  const malformed = await stack.api.request('PUT', hookPath('denied'), { metadata, task: fastTask('x'), bindings: [{ exchange: queueExchangeName(prefix(), 'task-completed'), routingKeyPattern: 'a.b#.c' }] });
  assert.equal(malformed.status, 400);
  // an update that keeps a hook's bindings is checked too
  ok(await stack.api.request('PUT', hookPath('denied'), { metadata, task: fastTask('x') }));
  const update = await stack.api.request('POST', hookPath('denied'), { metadata, task: fastTask('x'), bindings: [{ exchange: queueExchangeName(prefix(), 'task-defined'), routingKeyPattern: '#' }] });
  assert.equal(update.status, 400);
  assert.deepEqual(ok(await stack.api.request('GET', hookPath('denied'))).bindings, []);
  ok(await stack.api.request('DELETE', hookPath('denied')));
});

test('a message fires each hook whose binding takes it once, with the message as payload; a duplicate fires nothing more', async () => {
  const exchange = tgsExchangeName(prefix(), 'task-stalled');
  const task = { ...fastTask('fired'), created: '${now}', deadline: { $fromNow: '1 hour' }, payload: { outcomes: ['completed'], got: '${payload.what}', by: '${firedBy}' } };
  const triggerSchema = { type: 'object' };
  // pinned by the provisionerId and workerType words (a task of pool apples/red needs its create-task scope)
  ok(await stack.api.request('PUT', hookPath('apples'), { metadata, task, triggerSchema, bindings: [{ exchange, routingKeyPattern: '*.*.*.*.apples.#' }] }));
  ok(await stack.api.request('PUT', hookPath('fruit'), { metadata, task, triggerSchema, bindings: [{ exchange, routingKeyPattern: '*.*.*.*.*.red.#' }, { exchange, routingKeyPattern: '*.*.*.*.pears.*.#' }] }));
  // a triggerSchema the message does not match: not fired (Taskcluster discards the message for that hook); pinned
  // by the schedulerId word
  ok(await stack.api.request('PUT', hookPath('strict'), { metadata, task, bindings: [{ exchange, routingKeyPattern: '*.*.*.*.*.*.-.#' }] }));
  await boundTo([exchange], [
    { exchange, routingKeyPattern: '*.*.*.*.apples.#' },
    { exchange, routingKeyPattern: '*.*.*.*.*.red.#' },
    { exchange, routingKeyPattern: '*.*.*.*.pears.*.#' },
    { exchange, routingKeyPattern: '*.*.*.*.*.*.-.#' },
  ]);

  const messageId = slugid.nice();
  const apple = taskKey('apples', 'red');
  publish(exchange, apple, { what: 'apple' }, messageId);
  // the same message again (a redelivery as the relay makes it after a lost confirm: same messageId)
  publish(exchange, apple, { what: 'apple' }, messageId);
  const pear = taskKey('pears', 'green');
  publish(exchange, pear, { what: 'pear' }); // no messageId: keyed by its content
  publish(exchange, pear, { what: 'pear' });
  publish(exchange, taskKey('plums', 'blue'), { what: 'plum' }); // no binding of apples or fruit takes it
  await eventually(async () => listener.stats.messages >= 5 || undefined, 'the five messages handled');

  const apples = await fires('apples');
  const fruit = await fires('fruit');
  assert.equal(apples.length, 1, JSON.stringify(apples));
  assert.equal(fruit.length, 2, JSON.stringify(fruit));
  assert.deepEqual(await fires('strict'), []);
  assert.ok([...apples, ...fruit].every((f) => f.firedBy === 'pulseMessage' && f.result === 'success'));
  assert.equal(apples[0].taskId, messageTaskId(await fireIdKey(stack.api.db.pool), 'bound', 'apples', `id:${messageId}`));
  const created = ok(await stack.api.request('GET', `/api/queue/v1/task/${apples[0].taskId}`));
  assert.deepEqual(created.payload, { outcomes: ['completed'], got: 'apple', by: 'pulseMessage' });
  const gotByFruit = await Promise.all(fruit.map(async (f) => ok(await stack.api.request('GET', `/api/queue/v1/task/${f.taskId}`)).payload.got));
  assert.deepEqual(gotByFruit.sort(), ['apple', 'pear']);
  assert.equal(listener.stats.created, 3);
  // the apple's copy for apples and fruit, the pear's for fruit
  assert.equal(listener.stats.alreadyFired, 3);
  // the same counts as metrics, as `tgs bridge` exposes them
  const unobserve = observeHookListener(listener.stats);
  try {
    const metric = async (name: string) => (await registry.getSingleMetric(name)!.get()).values[0]?.value;
    assert.equal(await metric('tgs_hook_listener_fires_total'), 3);
    assert.equal(await metric('tgs_hook_listener_messages_total'), listener.stats.messages);
    assert.equal(await metric('tgs_hook_listener_requeued_messages_total'), 0);
  } finally {
    unobserve();
  }

  for (const hookId of ['apples', 'fruit', 'strict']) ok(await stack.api.request('DELETE', hookPath(hookId)));
  await boundTo([exchange], []);
});

test('a message whose fire was recorded before its ack (a listener that died between the two) fires nothing when delivered again', async () => {
  const exchange = schedulerExchangeName(prefix(), 'task-graph-canceled');
  const task = { ...fastTask('redelivered'), created: '${now}', deadline: { $fromNow: '1 hour' } };
  ok(await stack.api.request('PUT', hookPath('redelivered'), { metadata, task, triggerSchema: { type: 'object' }, bindings: [{ exchange, routingKeyPattern: 'route.redelivered.#' }] }));
  await boundTo([exchange], [{ exchange, routingKeyPattern: 'route.redelivered.#' }]);
  const messageId = slugid.nice();
  const first = await fireHooksForMessage({ pool: stack.api.db.pool, config: stack.config, temporal }, { exchange, routingKey: 'x', cc: ['route.redelivered'], messageId, content: Buffer.from('{}') });
  assert.equal(first.created, 1);
  const before = listener.stats.messages;
  publish(exchange, 'x', {}, messageId, ['route.redelivered']);
  await eventually(async () => listener.stats.messages > before || undefined, 'the redelivered message handled');
  assert.equal((await fires('redelivered')).length, 1);
  ok(await stack.api.request('DELETE', hookPath('redelivered')));
});

test('a hook bound to task-graph-finished fires when the graph finishes; updated to other bindings and removed, it is unbound', async () => {
  const finished = schedulerExchangeName(prefix(), 'task-graph-finished');
  const routing = `n${slugid.nice().slice(0, 8).replace(/[^a-zA-Z0-9]/g, 'x')}`;
  ok(await stack.api.request('PUT', hookPath('next'), {
    metadata,
    triggerSchema: { type: 'object' },
    // the graph's route is a CC key of its messages: only this test's graphs fire it
    bindings: [{ exchange: finished, routingKeyPattern: `route.tests.${routing}` }],
    task: { ...fastTask('after the graph'), created: '${now}', deadline: { $fromNow: '1 hour' }, payload: { outcomes: ['completed'], after: '${payload.status.taskGraphId}' } },
  }));
  await boundTo([finished], [{ exchange: finished, routingKeyPattern: `route.tests.${routing}` }]);

  const taskGraphId = slugid.nice();
  ok(await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${taskGraphId}`, { ...graphOf({ a: {}, b: { requires: ['a'] } }), routes: [`tests.${routing}`] }));
  const [fire] = await eventually(async () => {
    const f = await fires('next');
    return f.length > 0 && f;
  }, 'the hook fired by task-graph-finished', 60_000);
  assert.equal(fire.firedBy, 'pulseMessage');
  assert.equal(fire.result, 'success', fire.error);
  assert.equal(ok(await stack.api.request('GET', `/api/queue/v1/task/${fire.taskId}`)).payload.after, taskGraphId);

  // updated: the old binding goes, the new one comes; a graph finishing now fires nothing
  const canceled = schedulerExchangeName(prefix(), 'task-graph-canceled');
  ok(await stack.api.request('POST', hookPath('next'), {
    metadata,
    triggerSchema: { type: 'object' },
    bindings: [{ exchange: canceled, routingKeyPattern: `route.tests.${routing}` }],
    task: fastTask('after the graph'),
  }));
  await boundTo([finished, canceled], [{ exchange: canceled, routingKeyPattern: `route.tests.${routing}` }]);
  const second = slugid.nice();
  const handled = listener.stats.messages;
  ok(await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${second}`, { ...graphOf({ c: {} }), routes: [`tests.${routing}`] }));
  await eventually(async () => (await stack.api.request('GET', `/api/scheduler/v1/task-graph/${second}/status`)).body.status?.state === 'finished', 'the second graph finished', 60_000);
  // its finished message, had it been routed to the listener, would have been handled before this marker, which
  // fires the hook through its new binding
  publish(canceled, `_._._._._._.-.marker._`, { marker: true }, undefined, [`route.tests.${routing}`]);
  await eventually(async () => listener.stats.messages > handled || undefined, 'the marker handled');
  assert.equal(listener.stats.messages, handled + 1, 'only the marker reached the listener');
  assert.equal((await fires('next')).length, 2);

  ok(await stack.api.request('DELETE', hookPath('next')));
  await boundTo([finished, canceled], []);
});

test('a binding no scope pins (any submitter could make a message it takes) is refused with 400 saying how to bind a route', async () => {
  const finished = schedulerExchangeName(prefix(), 'task-graph-finished');
  const completed = queueExchangeName(prefix(), 'task-completed');
  const refused = [
    { exchange: finished, routingKeyPattern: '#.nightly' }, // the review's (and the old docs') example
    { exchange: finished, routingKeyPattern: '#' },
    { exchange: finished, routingKeyPattern: '_._._._._._.-.*.nightly' }, // a graph's schedulerId is the deployment's own
    { exchange: finished, routingKeyPattern: 'route.#' },
    { exchange: finished, routingKeyPattern: 'route.*.nightly' },
    { exchange: completed, routingKeyPattern: '#.tgs-test.fast.#' }, // `#` first: the words may sit in the routing
    { exchange: completed, routingKeyPattern: '*.*.*.*.*.*.*.*.nightly' }, // taskGroupId and routing are free
  ];
  for (const binding of refused) {
    const res = await stack.api.request('PUT', hookPath('unpinned'), { metadata, task: fastTask('x'), bindings: [binding] });
    assert.equal(res.status, 400, JSON.stringify(binding));
    assert.equal(res.body.code, 'InputError');
    assert.match(res.body.message, /any task or graph submitter can make/);
    assert.match(res.body.message, /bind `route\.<route>`/);
  }
  for (const routingKeyPattern of ['route.project.release.nightly', 'route.project.#']) {
    ok(await stack.api.request('PUT', hookPath('unpinned'), { metadata, task: fastTask('x'), bindings: [{ exchange: finished, routingKeyPattern }] }));
    ok(await stack.api.request('DELETE', hookPath('unpinned')));
  }
  ok(await stack.api.request('PUT', hookPath('unpinned'), { metadata, task: fastTask('x'), bindings: [{ exchange: completed, routingKeyPattern: '*.*.*.*.tgs-test.#' }] }));
  ok(await stack.api.request('DELETE', hookPath('unpinned')));
});

test("security review 2026-11-28 #2: a low-trust submitter's graph routed `nightly` no longer fires the release hook; a stored `#.nightly` binding is neither bound nor fired", async () => {
  const finished = schedulerExchangeName(prefix(), 'task-graph-finished');
  // the release hook's role holds what the low-trust client lacks (the review's signing-key secret and release route)
  ok(await stack.api.request('PUT', `/api/auth/v1/roles/${encodeURIComponent('hook-id:release/nightly')}`, {
    description: 'the release hook',
    scopes: ['secrets:get:project/release-signing-key', 'queue:create-task:lowest:tgs-test/fast', 'queue:scheduler-id:-'],
  }));
  const release = '/api/hooks/v1/hooks/release/nightly';
  const task = { ...fastTask('publish'), created: '${now}', deadline: { $fromNow: '1 hour' }, scopes: ['secrets:get:project/release-signing-key'], payload: { outcomes: ['completed'], graph: '${payload.status.taskGraphId}' } };
  const legacy = await stack.api.request('PUT', release, { metadata, task, triggerSchema: { type: 'object' }, bindings: [{ exchange: finished, routingKeyPattern: '#.nightly' }] });
  assert.equal(legacy.status, 400);
  ok(await stack.api.request('PUT', release, { metadata, task, triggerSchema: { type: 'object' }, bindings: [{ exchange: finished, routingKeyPattern: 'route.project.release.nightly' }] }));
  // a hook stored before the rule, as the database of an upgraded deployment holds it
  await stack.api.db.pool.query(`UPDATE hooks SET bindings = bindings || $1::jsonb WHERE hook_group_id = 'release' AND hook_id = 'nightly'`, [
    JSON.stringify([{ exchange: finished, routingKeyPattern: '#.nightly' }]),
  ]);
  const changes = await listener.reconcile();
  assert.deepEqual(changes?.unpinned, [{ exchange: finished, routingKeyPattern: '#.nightly' }]);
  assert.deepEqual(changes?.unpinnedHooks, ['release/nightly'], 'the listener names the hook');
  await boundTo([finished], [{ exchange: finished, routingKeyPattern: 'route.project.release.nightly' }]);

  const lowClient = `lowtrust-${slugid.nice()}`;
  const created = await createClient(stack.api.db.pool, lowClient, {
    description: 'the review\'s lowtrust client',
    expires: new Date(Date.now() + 86_400_000).toISOString(),
    scopes: ['scheduler:create-task-graph', 'queue:create-task:lowest:tgs-test/fast', `queue:scheduler-id:${stack.config.schedulerId}`],
    deleteOnExpiration: false,
  });
  const low = { clientId: lowClient, accessToken: created.accessToken };
  // the route is the submitter's word only with its scope
  const withRoute = await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${slugid.nice()}`, { ...graphOf({ build: {} }, 'nightly'), routes: ['project.release.nightly'] }, low);
  assert.equal(withRoute.status, 403, JSON.stringify(withRoute.body));
  assert.match(withRoute.body.message, /queue:route:project\.release\.nightly/);
  const evil = slugid.nice();
  ok(await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${evil}`, graphOf({ build: { payload: { evil: 'echo EVIL > build.tar' } } }, 'nightly'), low));
  await eventually(async () => (await stack.api.request('GET', `/api/scheduler/v1/task-graph/${evil}/status`)).body.status?.state === 'finished', 'the low-trust graph finished', 60_000);
  // delivered to the listener anyway (another hook's binding could bring it), its message fires nothing
  const fired = await fireHooksForMessage({ pool: stack.api.db.pool, config: stack.config, temporal }, {
    exchange: finished,
    routingKey: `_._._._._._.${stack.config.schedulerId}.${evil}.nightly`,
    cc: [],
    messageId: `${evil}/task-graph-finished/1`,
    content: Buffer.from(JSON.stringify({ version: 1, status: { schedulerId: stack.config.schedulerId, taskGraphId: evil, state: 'finished', routing: 'nightly' }, taskCount: 1 })),
  });
  assert.deepEqual(fired, { created: 0, alreadyFired: 0, refusedOrDeclined: 0, discarded: 0, unparsable: false });

  // a graph whose submitter holds the route fires it, with its own id
  const official = slugid.nice();
  ok(await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${official}`, { ...graphOf({ build: {} }, 'nightly'), routes: ['project.release.nightly'] }));
  const [fire] = await eventually(async () => {
    const f = await lastFires(stack, release);
    return f.length > 0 && f;
  }, 'the release hook fired by the official graph', 60_000);
  assert.equal(fire.result, 'success', JSON.stringify(fire));
  assert.equal(ok(await stack.api.request('GET', `/api/queue/v1/task/${fire.taskId}`)).payload.graph, official);
  assert.equal((await lastFires(stack, release)).length, 1, 'the low-trust graph fired nothing');
  ok(await stack.api.request('DELETE', release));
});

test('security review 2026-11-28 #8: the listener queue holds at most HOOK_LISTENER_MAX_LENGTH messages, the oldest past it dead-lettered; an unbounded queue of before is used and the fix logged', async () => {
  const { declareHookListenerQueue, hookListenerDeadName, HOOK_LISTENER_MAX_LENGTH } = await import('../../src/hooks/listenerQueue.js');
  const { hookListenerQueueName } = await import('../../src/hooks/listenerBindings.js');
  const config = { ...stack.config, schedulerId: `bound-${slugid.nice().slice(0, 8).replace(/[^A-Za-z0-9]/g, 'x')}` };
  const queue = hookListenerQueueName(config);
  const dead = hookListenerDeadName(config);
  const exchange = `${config.exchangePrefix}tgs-test/hook-listener-bound/${config.schedulerId}`;
  const logged: string[] = [];
  const ch = await declareHookListenerQueue(bus, config, 16, (line) => logged.push(line));
  try {
    await ch.assertExchange(exchange, 'topic', { durable: false, autoDelete: false });
    await ch.bindQueue(queue, exchange, '#');
    // nobody consumes: a listener far behind (a slow hook's messages, a second each)
    for (let i = 0; i < HOOK_LISTENER_MAX_LENGTH + 5; i++) ch.publish(exchange, 'k', Buffer.from(JSON.stringify({ i })), { messageId: String(i) });
    await eventually(async () => (await ch.assertQueue(dead, { durable: true, arguments: { 'x-max-length': 100_000 } })).messageCount === 5 || undefined, 'five dead-lettered');
    const kept = await ch.assertQueue(queue, { durable: true, arguments: (await import('../../src/hooks/listenerQueue.js')).hookListenerQueueArguments(config) });
    assert.equal(kept.messageCount, HOOK_LISTENER_MAX_LENGTH);
    assert.equal(logged.length, 0, logged.join('\n'));
  } finally {
    await ch.deleteQueue(queue);
    await ch.deleteQueue(dead);
    await ch.close();
  }
  // a queue declared by a listener before the bound
  const old = await bus.createChannel();
  await old.assertQueue(queue, { durable: true });
  const reused = await declareHookListenerQueue(bus, config, 16, (line) => logged.push(line));
  assert.match(logged.join('\n'), /was declared without its length bound[\s\S]*rabbitmqctl delete_queue/);
  await reused.deleteQueue(queue);
  await reused.deleteQueue(dead);
  await reused.deleteExchange(exchange).catch(() => undefined);
  await reused.close();
  await old.close().catch(() => undefined);
});
