import { test } from 'node:test';
import assert from 'node:assert/strict';
import { LOADED_BATCH, LOADED_SPACING_MS, readSpacing } from '../../src/relay/readSpacing.js';

test(`after a batch of ${LOADED_BATCH} rows or more the next read starts ${LOADED_SPACING_MS} ms after this one's`, () => {
  assert.equal(readSpacing({ more: false, size: LOADED_BATCH, startedAt: 1000 }, 1005), LOADED_SPACING_MS - 5);
  assert.equal(readSpacing({ more: false, size: 400, startedAt: 1000 }, 1000 + LOADED_SPACING_MS + 3), 0, 'spaced, but the time has passed');
});

test('a small batch, or one that left rows waiting, is not spaced', () => {
  assert.equal(readSpacing({ more: false, size: LOADED_BATCH - 1, startedAt: 1000 }, 1001), undefined);
  assert.equal(readSpacing({ more: true, size: 500, startedAt: 1000 }, 1001), undefined);
});
