import { test } from 'node:test';
import assert from 'node:assert/strict';
import { FlushSpacing, LOADED_FLUSH } from '../../src/bridge/flushSpacing.js';

test('after a quiet spell a flush starts at once; within the interval of the last one it waits for the rest', () => {
  const spacing = new FlushSpacing();
  assert.equal(spacing.delay(1_000_000), 0);
  spacing.started(1_000_000, 1);
  assert.equal(spacing.delay(1_000_010), 15, 'a chain: 25 ms between flush starts');
  assert.equal(spacing.delay(1_000_030), 0);
});

test(`after a flush of ${LOADED_FLUSH} messages or more the next waits the loaded interval`, () => {
  const spacing = new FlushSpacing({ minIntervalMs: 25, loadedIntervalMs: 100 });
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
