import { test } from 'node:test';
import assert from 'node:assert/strict';
import { shouldContinueAsNew } from '../../src/workflows/continueAsNew.js';

const info = (historyLength: number, historySize: number, continueAsNewSuggested: boolean) => ({ historyLength, historySize, continueAsNewSuggested });

test('a suggestion right after loading a big graph is not honoured (it would continue-as-new forever)', () => {
  const loadedAt = { events: 80, bytes: 7_000_000 };
  assert.equal(shouldContinueAsNew(info(85, 7_100_000, true), loadedAt, 10_000), false);
  assert.equal(shouldContinueAsNew(info(200, 7_500_000, true), loadedAt, 10_000), false, 'not enough work bytes yet');
  assert.equal(shouldContinueAsNew(info(900, 9_000_000, true), loadedAt, 10_000), false, 'reloading would write more history than the run did');
  assert.equal(shouldContinueAsNew(info(2_000, 14_100_000, true), loadedAt, 10_000), true, 'the run wrote as much as loading');
});

test('a small graph follows the suggestion as soon as it did more work than loading', () => {
  const loadedAt = { events: 10, bytes: 8_000 };
  assert.equal(shouldContinueAsNew(info(120, 40_000, false), loadedAt, 10_000), false, 'no suggestion, no continue-as-new');
  assert.equal(shouldContinueAsNew(info(120, 40_000, true), loadedAt, 10_000), true);
});

test('the hard limits apply whatever the suggestion says', () => {
  const loadedAt = { events: 80, bytes: 7_000_000 };
  assert.equal(shouldContinueAsNew(info(10_001, 8_000_000, false), loadedAt, 10_000), true);
  assert.equal(shouldContinueAsNew(info(100, 33 * 1024 * 1024, false), loadedAt, 10_000), true);
});
