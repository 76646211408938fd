import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createTestDatabase, type TestDatabase } from '../../support/db.js';
import { warnWithoutAutovacuum } from '../../src/db/autovacuum.js';
import type { Queryable } from '../../src/db/pool.js';

let db: TestDatabase;
before(async () => {
  db = await createTestDatabase({ migrate: false });
});
after(async () => {
  await db.drop();
});

const settings = (autovacuum: string, track_counts: string) => ({ query: async () => ({ rows: [{ autovacuum, track_counts }] }) }) as unknown as Queryable;

test('a server without autovacuum (or the statistics it needs) gets one warning naming what is off and what to do', async () => {
  for (const [autovacuum, trackCounts, named] of [['off', 'on', /autovacuum off/], ['on', 'off', /track_counts off/], ['off', 'off', /autovacuum and track_counts off/]] as const) {
    const lines: string[] = [];
    assert.equal(await warnWithoutAutovacuum(settings(autovacuum, trackCounts), (l) => lines.push(l)), true);
    assert.equal(lines.length, 1);
    assert.match(lines[0], named);
    assert.match(lines[0], /postgresql\.conf: autovacuum = on, track_counts = on/);
  }
  const lines: string[] = [];
  assert.equal(await warnWithoutAutovacuum(settings('on', 'on'), (l) => lines.push(l)), false);
  assert.deepEqual(lines, []);
});

test('the real server: warns exactly when SHOW autovacuum says off', async () => {
  const { rows } = await db.pool.query<{ autovacuum: string; track_counts: string }>('SELECT current_setting($1) AS autovacuum, current_setting($2) AS track_counts', ['autovacuum', 'track_counts']);
  const lines: string[] = [];
  const warned = await warnWithoutAutovacuum(db.pool, (l) => lines.push(l));
  assert.equal(warned, rows[0].autovacuum !== 'on' || rows[0].track_counts !== 'on');
  assert.equal(lines.length, warned ? 1 : 0);
});
