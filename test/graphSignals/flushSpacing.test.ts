import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FlushSpacing, LOADED_FLUSH } from '../../src/graphSignals/flushSpacing.js';

test('after a quiet spell a flush starts at once; within the interval of the last one it waits for the rest', () => {
  const spacing = new FlushSpacing();
  assert.equal(spacing.delay(1_000_000), 0);
  spacing.started(1_000_000, 1);
  assert.equal(spacing.delay(1_000_010), 15, 'a chain: 25 ms between flush starts');
  assert.equal(spacing.delay(1_000_030), 0);
});

test(`after a flush of ${LOADED_FLUSH} messages or more the next waits the loaded interval`, () => {
  // (quietMs past the interval: messages keep coming, the test below)
  const spacing = new FlushSpacing({ minIntervalMs: 25, loadedIntervalMs: 100, quietMs: 1000 });
  spacing.started(0, LOADED_FLUSH - 1);
  assert.equal(spacing.delay(0), 25);
  spacing.started(0, LOADED_FLUSH);
  assert.equal(spacing.delay(0), 100);
  assert.equal(spacing.delay(60), 40);
});

test('flushMs is the least wait whatever the spacing', () => {
  const spacing = new FlushSpacing({ flushMs: 5 });
  assert.equal(spacing.delay(1_000_000), 5);
});

test('within the loaded interval a batch goes once no message has come for quietMs; a steady stream waits the interval', () => {
  const spacing = new FlushSpacing({ minIntervalMs: 25, loadedIntervalMs: 100, quietMs: 20 });
  spacing.started(0, LOADED_FLUSH);
  spacing.arrived(10);
  assert.equal(spacing.delay(10), 20, 'a burst may still be coming: wait quietMs after its last message');
  spacing.arrived(25);
  assert.equal(spacing.delay(30), 15, 'each message moves the quiet deadline');
  assert.equal(spacing.delay(45), 0, 'the burst is over: its last messages go now, not at 100 ms');
  // messages every 10 ms: the quiet deadline never comes, the loaded interval holds
  for (let at = 50; at <= 90; at += 10) spacing.arrived(at);
  assert.equal(spacing.delay(95), 5);
  // after a small flush the quiet rule does not apply: the 25 ms interval is short already
  spacing.started(200, 1);
  spacing.arrived(201);
  assert.equal(spacing.delay(201), 24);
});
