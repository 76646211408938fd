import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clusterFaults, defaultCombined, parseFlags, processFaults, serviceFaults, topologyFaults } from '../../bench/chaos/options.js';

// `npm run chaos` flags: the Temporal topology decides which Temporal faults a run has.
test('without --topology the suite runs on the dev server with its faults, as before', () => {
  const flags = parseFlags(['--short']);
  assert.equal(flags.topology, 'dev');
  assert.deepEqual(topologyFaults(flags.topology), { faults: [...processFaults, ...serviceFaults], combined: defaultCombined });
});

test('--topology cluster (or =cluster) swaps kill-temporal for the cluster faults, alone and in the combined groups', () => {
  for (const args of [['--topology', 'cluster'], ['--topology=cluster']]) assert.equal(parseFlags(args).topology, 'cluster');
  const { faults, combined } = topologyFaults('cluster');
  assert.ok(!faults.includes('kill-temporal'));
  for (const f of clusterFaults) assert.ok(faults.includes(f), f);
  assert.ok(faults.includes('restart-postgres') && faults.includes('restart-rabbitmq'));
  assert.ok(!combined.flat().includes('kill-temporal'));
  assert.ok(combined.some((group) => group.includes('kill-temporal-history')));
});

test('a fault of the other topology, or an unknown topology, is refused naming what is known', () => {
  assert.throws(() => parseFlags(['--topology', 'cluster', '--faults=kill-temporal']), /unknown fault kill-temporal for --topology cluster; known: .*kill-temporal-history/);
  assert.throws(() => parseFlags(['--faults=kill-temporal-matching']), /unknown fault kill-temporal-matching for --topology dev/);
  assert.throws(() => parseFlags(['--topology', 'k8s']), /--topology k8s: give dev .* or cluster/);
});
