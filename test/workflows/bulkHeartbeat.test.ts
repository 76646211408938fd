import { test } from 'node:test';
import assert from 'node:assert/strict';
import { MockActivityEnvironment } from '@temporalio/testing';
import { BULK_HEARTBEAT_EVERY_MS, withHeartbeat } from '../../src/activities/heartbeat.js';

// A bulk activity (loadNodes, loadGraph, createGraph, joinTasks) heartbeats while it runs, so the server
// retries it elsewhere 30 s after its worker died instead of at its 5-minute start-to-close timeout.
test('a bulk activity heartbeats at its start and then periodically until it returns', { timeout: 30_000 }, async () => {
  const env = new MockActivityEnvironment();
  const beats: number[] = [];
  const started = Date.now();
  env.on('heartbeat', () => beats.push(Date.now() - started));
  const result = await env.run(() => withHeartbeat(() => new Promise<string>((r) => setTimeout(() => r('page'), BULK_HEARTBEAT_EVERY_MS * 2 + 500))));
  assert.equal(result, 'page');
  assert.ok(beats.length >= 3, `heartbeats at ${beats.join(', ')} ms`);
  assert.ok(beats[0] < BULK_HEARTBEAT_EVERY_MS, 'the first one at the start');
  const count = beats.length;
  await new Promise((r) => setTimeout(r, BULK_HEARTBEAT_EVERY_MS + 500));
  assert.equal(beats.length, count, 'none after it returned');
});

test('outside an activity it just runs the function', async () => {
  assert.equal(await withHeartbeat(async () => 42), 42);
});
