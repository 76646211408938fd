import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadMigrations } from '../../src/db/migrate.js';

// src/sql/README.md: the numbers below 013 are kept as deployed; from 013 on every number follows the previous one.
const HISTORIC = [1, 5, 6, 13];

test('migrations are numbered without gaps after the historic ones, and no two share a number', async () => {
  const ids = (await loadMigrations()).map((m) => m.id);
  assert.deepEqual(ids.slice(0, HISTORIC.length), HISTORIC);
  assert.equal(new Set(ids).size, ids.length);
  for (let i = HISTORIC.length; i < ids.length; i++) {
    assert.equal(ids[i], ids[i - 1] + 1, `migration ${ids[i]} follows ${ids[i - 1]}: take the next number instead`);
  }
});
