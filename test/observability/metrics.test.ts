import { test } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import pino from 'pino';
import amqp from 'amqplib';
import { installTemporalRuntime } from '../../src/temporal/runtime.js';
import { startMetricsServer, type MetricsServer } from '../../src/observability/metricsServer.js';
import { observeBridge, observeRelay } from '../../src/observability/metrics.js';
import { eventually } from '../../support/stack.js';
import { startFastWorker } from '../../support/fastWorker.js';
import { fastTask, graphOf } from '../../support/graphs.js';
import { useStack } from '../helpers/stackFixture.js';

// As in `tgs dev`: API, relay, bridge and scheduler worker in this process, one registry, one scrape.
let metrics: MetricsServer;
const quiet = pino({ level: 'silent' });
const stack = useStack({
  // Before the stack's worker connects: the SDK runtime (and its Prometheus exporter) is installed once per process.
  beforeStart: () => installTemporalRuntime({ log: quiet, metrics: true }),
});
stack.onStart(async () => {
  if (stack.relay) observeRelay(stack.config.databaseUrl, stack.api.db.pool, stack.relay.stats);
  if (stack.bridge) observeBridge(stack.bridge.stats);
  metrics = await startMetricsServer({ port: 0, host: '127.0.0.1', log: quiet });
});
stack.onStop(async () => {
  await metrics.close();
});

/** One scrape as `name{labels} value` → value (the labels as printed). */
async function scrape(): Promise<{ text: string; value(name: string, labels?: Record<string, string>): number }> {
  const res = await fetch(`${metrics.url}/metrics`);
  assert.equal(res.status, 200);
  assert.match(res.headers.get('content-type') ?? '', /^text\/plain/);
  const text = await res.text();
  return {
    text,
    value(name, labels = {}) {
      let sum = 0;
      let found = false;
      for (const line of text.split('\n')) {
        const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$/.exec(line);
        if (!m || m[1] !== name) continue;
        const has = Object.entries(labels).every(([k, v]) => (m[2] ?? '').includes(`${k}="${v}"`));
        if (!has) continue;
        found = true;
        sum += Number(m[3]);
      }
      return found ? sum : Number.NaN;
    },
  };
}

test('one scrape while a graph runs: HTTP, pending, claim, hop, relay, graph signal, graph and Temporal SDK metrics all move', async () => {
  const before = await scrape();
  const count = (s: typeof before, name: string, labels?: Record<string, string>) => {
    const v = s.value(name, labels);
    return Number.isNaN(v) ? 0 : v;
  };

  // A task nobody works on: the pending gauge must show it, by worker pool.
  const idleTaskId = slugid.nice();
  const created = await stack.api.request('PUT', `/api/queue/v1/task/${idleTaskId}`, { ...fastTask('idle'), workerType: 'nobody-home' });
  assert.equal(created.status, 200, JSON.stringify(created.body));
  const pending = await eventually(async () => (await scrape()).value('tgs_queue_pending_tasks', { provisionerId: 'tgs-test', workerType: 'nobody-home' }) === 1, 'the pending gauge at 1');
  assert.ok(pending);

  // A chain of four: three hops, each through relay (its graph-signal lane) → workflow → schedule activity.
  const worker = startFastWorker({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'fast' });
  const graphId = slugid.nice();
  try {
    await stack.root.request('scheduler', 'PUT', `/task-graph/${graphId}`, graphOf({ a: {}, b: { requires: ['a'] }, c: { requires: ['b'] }, d: { requires: ['c'] } }));
    await eventually(
      async () => (await stack.root.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${graphId}/status`)).status.state === 'finished',
      'the graph finished',
      60_000,
    );
  } finally {
    await worker.stop();
  }

  const after = await eventually(async () => {
    const s = await scrape();
    // the lane observes once the signal is accepted; the last resolution's may still be in flight
    return count(s, 'tgs_graph_signal_lag_seconds_count') >= 4 && count(s, 'tgs_graph_hop_seconds_count') >= 3 ? s : undefined;
  }, 'graph signal lag and hop observations');

  const moved = (name: string, atLeast: number, labels?: Record<string, string>) =>
    assert.ok(count(after, name, labels) - count(before, name, labels) >= atLeast, `${name}${JSON.stringify(labels ?? {})}: ${count(before, name, labels)} → ${count(after, name, labels)}`);
  moved('tgs_http_request_duration_seconds_count', 4, { service: 'queue', method: 'claimWork', status: '200' });
  moved('tgs_http_request_duration_seconds_count', 4, { service: 'queue', method: 'reportCompleted', status: '200' });
  moved('tgs_http_request_duration_seconds_count', 1, { service: 'scheduler', method: 'createTaskGraph', status: '200' });
  moved('tgs_http_request_duration_seconds_count', 1, { service: 'queue', method: 'createTask', status: '200' });
  moved('tgs_claim_work_wait_seconds_count', 4, { result: 'claimed' });
  moved('tgs_task_pending_seconds_count', 4);
  moved('tgs_graph_hop_seconds_count', 3);
  moved('tgs_graph_signal_lag_seconds_count', 4);
  moved('tgs_relay_published_messages_total', 8);
  moved('tgs_relay_graph_signals_total', 3);
  assert.ok(count(after, 'tgs_task_graphs', { state: 'finished' }) >= 1, 'graphs by state');
  assert.equal(after.value('tgs_relay_active'), 1);
  // sums are sane: a hop on one machine is under a minute, a pending wait is not negative
  assert.ok(after.value('tgs_graph_hop_seconds_sum') / after.value('tgs_graph_hop_seconds_count') < 60);
  assert.ok(after.value('tgs_task_pending_seconds_sum') >= 0);
  // the HTTP histogram is labelled by the endpoint's Taskcluster name, never by a raw URL
  assert.doesNotMatch(after.text, /tgs_http_request_duration_seconds_count\{[^}]*method="\/api/);
  // the Temporal SDK's own exporter, appended to the same scrape
  assert.match(after.text, /^temporal_workflow_task_\w+/m);
  assert.match(after.text, /^temporal_\w*activity\w*/m);
  assert.match(after.text, /^nodejs_eventloop_lag_seconds /m);
});

test('outbox backlog and the age of its oldest message grow while the relay cannot publish', async () => {
  // A queue that refuses every message (a nack: RabbitMQ's reject-publish at length 0) bound to task-defined: the
  // relay's batch is refused, so it and everything after it wait (a refusal is transient, never set aside).
  const conn = await amqp.connect(stack.config.amqpUrl);
  const refusing = `metrics-refusing-${slugid.nice()}`;
  try {
    const ch = await conn.createChannel();
    await ch.assertQueue(refusing, { arguments: { 'x-max-length': 0, 'x-overflow': 'reject-publish' } });
    await ch.bindQueue(refusing, `${stack.config.exchangePrefix}queue/v1/task-defined`, '#');
    const taskId = slugid.nice();
    const created = await stack.api.request('PUT', `/api/queue/v1/task/${taskId}`, { ...fastTask('unpublished'), workerType: 'nobody-home' });
    assert.equal(created.status, 200);
    const published = (await scrape()).value('tgs_relay_published_messages_total');
    await new Promise((r) => setTimeout(r, 1500));
    const s = await scrape();
    // task-defined and task-pending of the new task
    assert.ok(s.value('tgs_outbox_messages') >= 2, `outbox ${s.value('tgs_outbox_messages')}`);
    assert.ok(s.value('tgs_outbox_oldest_age_seconds') >= 1, `oldest ${s.value('tgs_outbox_oldest_age_seconds')}`);
    assert.equal(s.value('tgs_relay_published_messages_total'), published);
    assert.equal(s.value('tgs_outbox_dead_letters'), 0, 'a refusal is never set aside');
    await ch.deleteQueue(refusing);
  } finally {
    await conn.close().catch(() => undefined);
  }
  // unblocked: the backlog drains
  await eventually(async () => (await scrape()).value('tgs_outbox_messages') === 0, 'the outbox drained');
});

test('the metrics server answers /health, refuses other paths and methods with an error body', async () => {
  const health = await fetch(`${metrics.url}/health`);
  assert.equal(health.status, 200);
  const missing = await fetch(`${metrics.url}/nope`);
  assert.equal(missing.status, 404);
  assert.equal(((await missing.json()) as { code: string }).code, 'ResourceNotFound');
  const post = await fetch(`${metrics.url}/metrics`, { method: 'POST', body: 'x' });
  assert.equal(post.status, 405);
});
