import { test } from 'node:test';
import assert from 'node:assert/strict';
import { SignalBackoff } from '../../src/graphSignals/signalBackoff.js';

const boom = new Error('workflow task queue full');

test("a failing graph's messages alone are requeued; the others are acked", () => {
  const backoff = new SignalBackoff();
  const [m1, m2, m3] = ['m1', 'm2', 'm3'];
  const settled = backoff.settle([m1, m2, m3], [
    { key: 'ok', msgs: [m1] },
    { key: 'bad', msgs: [m2], error: boom },
  ]);
  assert.deepEqual(settled.accepted, [m1, m3], 'm3 concerned no graph (all ended): acked');
  assert.deepEqual([...settled.retries], [[250, [m2]]]);
  assert.deepEqual(settled.startedFailing, [{ key: 'bad', error: boom }]);
  assert.equal(settled.failedSignals, 1);
});

test("a graph's backoff doubles from 250 ms to 30 s, is logged once when it starts failing and once when it recovers", () => {
  const backoff = new SignalBackoff();
  const delays: number[] = [];
  let started = 0;
  for (let k = 0; k < 10; k++) {
    const settled = backoff.settle(['m'], [{ key: 'G', msgs: ['m'], error: boom }]);
    delays.push(...settled.retries.keys());
    started += settled.startedFailing.length;
  }
  assert.deepEqual(delays, [250, 500, 1000, 2000, 4000, 8000, 16_000, 30_000, 30_000, 30_000]);
  assert.equal(started, 1);
  const back = backoff.settle(['m'], [{ key: 'G', msgs: ['m'] }]);
  assert.deepEqual(back.recovered, [{ key: 'G', failures: 10 }]);
  assert.deepEqual(back.accepted, ['m']);
  assert.equal(backoff.failuresOf('G'), 0);
  assert.deepEqual([...backoff.settle(['m'], [{ key: 'G', msgs: ['m'], error: boom }]).retries.keys()], [250], 'a new failure starts over');
});

test('graphs keep their own counts: a failing graph does not slow another', () => {
  const backoff = new SignalBackoff();
  for (let k = 0; k < 5; k++) backoff.settle(['a'], [{ key: 'A', msgs: ['a'], error: boom }]);
  const settled = backoff.settle(['a', 'b'], [
    { key: 'A', msgs: ['a'], error: boom },
    { key: 'B', msgs: ['b'], error: boom },
  ]);
  assert.deepEqual([...settled.retries], [[8000, ['a']], [250, ['b']]]);
});

test('a message two graphs hear waits for the longer backoff, and is acked only when both accept', () => {
  const backoff = new SignalBackoff();
  backoff.settle(['x'], [{ key: 'A', msgs: ['x'], error: boom }]);
  backoff.settle(['x'], [{ key: 'A', msgs: ['x'], error: boom }]);
  const settled = backoff.settle(['shared'], [
    { key: 'A', msgs: ['shared'], error: boom },
    { key: 'B', msgs: ['shared'] },
  ]);
  assert.deepEqual([...settled.retries], [[1000, ['shared']]]);
  assert.deepEqual(settled.accepted, []);
});

test('a whole flush failing: 500 ms doubling to 10 s, reset by a flush that works', () => {
  const backoff = new SignalBackoff();
  const delays = Array.from({ length: 7 }, () => backoff.flushFailed());
  assert.deepEqual(delays, [500, 1000, 2000, 4000, 8000, 10_000, 10_000]);
  backoff.flushSucceeded();
  assert.equal(backoff.flushFailed(), 500);
});
