import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import slugid from 'slugid';
import { startStack, eventually, type Stack } from '../../support/stack.js';
import { startFastWorker } from '../../support/fastWorker.js';
import { graphOf } from '../../support/graphs.js';

// Stops the machine's RabbitMQ application for a few seconds: under test/serial, so no other test file runs meanwhile.
let stack: Stack;
let worker: ReturnType<typeof startFastWorker>;
const log: string[] = [];

before(async () => {
  stack = await startStack({ log: (line) => log.push(line) });
  worker = startFastWorker({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'fast', concurrency: 4 });
});
after(async () => {
  await worker.stop();
  await stack.stop();
});

const finished = (id: string) =>
  eventually(async () => (await stack.root.request('scheduler', 'GET', `/task-graph/${id}/status`)).status.state === 'finished', `graph ${id} finished`, 60_000);

test('RabbitMQ restarted (stop_app / start_app): the relay and the bridge reconnect by themselves, log it once each way, and graphs finish', async () => {
  const chain = graphOf({ a: {}, b: { requires: ['a'] }, c: { requires: ['b'] } });
  const before = slugid.nice();
  await stack.root.request('scheduler', 'PUT', `/task-graph/${before}`, chain);
  await finished(before);

  const during = slugid.nice();
  execFileSync('rabbitmqctl', ['stop_app'], { stdio: 'ignore' });
  try {
    // The API goes on: the graph and its first messages wait in the outbox.
    await stack.root.request('scheduler', 'PUT', `/task-graph/${during}`, chain);
    await new Promise((r) => setTimeout(r, 3000));
  } finally {
    execFileSync('rabbitmqctl', ['start_app'], { stdio: 'ignore' });
  }
  await finished(during);
  const after = slugid.nice();
  await stack.root.request('scheduler', 'PUT', `/task-graph/${after}`, chain);
  await finished(after);

  const lines = (text: string) => log.filter((l) => l.startsWith(text)).length;
  // graphs hear resolutions from Postgres (the relay's graph-signal lane), so they can finish before the bridge's
  // reconnection backoff has run out: its return is awaited, not assumed
  await eventually(async () => lines('bridge: RabbitMQ back') > 0, 'the bridge back on RabbitMQ', 60_000);
  const all = log.join('\n');
  assert.equal(lines('bridge: RabbitMQ unavailable'), 1, all);
  assert.equal(lines('bridge: RabbitMQ back'), 1, all);
  assert.equal(lines('relay: RabbitMQ unavailable'), 1, all);
  assert.equal(lines('relay: RabbitMQ back'), 1, all);
  assert.ok(log.length < 20, `a few lines for the whole outage, got ${log.length}:\n${all}`);
});
