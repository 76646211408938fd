import { test } from 'node:test';
import assert from 'node:assert/strict';
import { medianRatio, percentile } from '../../bench/stats.js';

test("claim + complete's ratio to its floor is the median of the rounds' ratios to two decimals, not to a tenth", () => {
  // a full run's three rounds (2026-11-28 11:14 UTC): 0.523, 0.413, 0.532, which percentile's tenth made 0.5
  assert.equal(medianRatio([[1357, 2596], [1199, 2906], [1487, 2795]]), 0.52);
  assert.equal(percentile([1357 / 2596, 1199 / 2906, 1487 / 2795], 50), 0.5, 'percentile keeps a latency\'s tenth of a ms');
  // 0.566 is not 0.6
  assert.equal(medianRatio([[1196, 2112], [1199, 1964], [1122, 2460]]), 0.57);
  assert.equal(medianRatio([[1, 2], [3, 4]]), 0.5, 'an even count: the lower middle');
  assert.ok(Number.isNaN(medianRatio([])));
});
