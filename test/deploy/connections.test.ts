import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';

// docs/deployments.md tells operators how many Postgres connections each process opens, to size max_connections
// (and a managed service's instance) by. The pools are the createPool calls of each process; this keeps the two equal.
const read = (file: string) => readFileSync(new URL(`../../${file}`, import.meta.url), 'utf8');
const doc = read('docs/deployments.md');
const poolSection = doc.slice(doc.indexOf('## Pool and timeouts'), doc.indexOf('## PgBouncer'));

/** The pool sizes a source file asks for, in order: `createPool(<url>, N` */
const pools = (file: string) => [...read(file).matchAll(/createPool\([^,]+,\s*(\d+)/g)].map((m) => Number(m[1]));

test('docs/deployments.md\'s connections a process match the pools each process makes', () => {
  const rows = new Map(
    [...poolSection.matchAll(/^\| `tgs ([a-z-]+)` \|([^|]+)\|([^|]*)\|$/gm)].map((m) => [m[1], { pool: m[2].trim(), sessions: m[3].split(',').filter((s) => s.trim()).length }]),
  );
  const expected: Record<string, number[]> = {
    api: pools('src/processes/api.ts'),
    'scheduler-worker': pools('src/cli/commands/schedulerWorker.ts'),
    bridge: pools('src/cli/commands/bridge.ts'),
    // the relay's own pool (src/relay/relay.ts) and its command's pool for the metrics reads
    relay: [...pools('src/relay/relay.ts'), ...pools('src/cli/commands/relay.ts')],
    migrate: pools('src/cli/commands/migrate.ts'),
  };
  for (const [name, sizes] of Object.entries(expected)) {
    assert.ok(sizes.length > 0, `found the pool of tgs ${name}`);
    const row = rows.get(name);
    assert.ok(row, `docs/deployments.md has a row for tgs ${name}`);
    assert.deepEqual(row.pool.match(/\d+/g)?.map(Number), sizes, `tgs ${name}: the docs say ${row.pool}`);
  }
  // the sum operators add up: pool + sessions a process
  const totals = /must cover the sum above: (\d+) an API, (\d+) a relay, (\d+) a bridge, (\d+) a scheduler worker, (\d+) for `tgs migrate`/.exec(doc);
  assert.ok(totals, 'the sum sentence');
  const total = (name: string) => expected[name].reduce((a, b) => a + b, 0) + (rows.get(name)?.sessions ?? 0);
  assert.deepEqual(totals.slice(1).map(Number), ['api', 'relay', 'bridge', 'scheduler-worker', 'migrate'].map(total));
});
