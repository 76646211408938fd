import { test } from 'node:test';
import assert from 'node:assert/strict';
import { clusterFaults, clusterServices, defaultCombined, machineServices, parseFlags, processFaults, rabbitmqClusterFaults, serviceFaults, topologyFaults } from '../../bench/chaos/options.js';

// `npm run chaos` flags: the topology decides which Temporal and RabbitMQ faults a run has.
test('without --topology the suite runs on the dev server with its faults, as before', () => {
  const flags = parseFlags(['--short']);
  assert.equal(flags.topology, 'dev');
  assert.deepEqual(topologyFaults(flags.topology), { faults: [...processFaults, ...serviceFaults], combined: defaultCombined });
});

test('--topology cluster (or =cluster) swaps kill-temporal and restart-rabbitmq for the clusters\' faults, alone and in the combined groups', () => {
  for (const args of [['--topology', 'cluster'], ['--topology=cluster']]) assert.equal(parseFlags(args).topology, 'cluster');
  const { faults, combined } = topologyFaults('cluster');
  assert.ok(!faults.includes('kill-temporal') && !faults.includes('restart-rabbitmq'));
  for (const f of [...clusterFaults, ...rabbitmqClusterFaults]) assert.ok(faults.includes(f), f);
  assert.ok(faults.includes('restart-postgres'));
  assert.ok(!combined.flat().includes('kill-temporal') && !combined.flat().includes('restart-rabbitmq'));
  assert.ok(combined.some((group) => group.includes('kill-temporal-history') && group.includes('stop-rabbitmq-leader')));
  assert.ok(combined.some((group) => group.includes('stop-rabbitmq-node')));
  // never the leader and another node together: two of three nodes down is no quorum
  assert.ok(!combined.some((group) => group.includes('stop-rabbitmq-leader') && group.includes('stop-rabbitmq-node')));
});

test('on a RabbitMQ cluster the processes get every node\'s URL and rabbitmqctl the first node', () => {
  const nodes = ['a', 'b', 'c'].map((x, k) => ({ name: `rabbit-${x}@localhost`, url: `amqp://guest:guest@127.0.0.1:${5681 + k}` }));
  const services = clusterServices(machineServices('15'), { nodes });
  assert.equal(services.amqpBase, 'amqp://guest:guest@127.0.0.1:5681,amqp://guest:guest@127.0.0.1:5682,amqp://guest:guest@127.0.0.1:5683');
  assert.deepEqual(services.rabbitmqctl, ['rabbitmqctl', '-n', 'rabbit-a@localhost']);
  assert.deepEqual(services.rabbitmqNodes, nodes.map((n) => n.name));
  assert.equal(services.pgBase, machineServices('15').pgBase);
});

test('a fault of the other topology, or an unknown topology, is refused naming what is known', () => {
  assert.throws(() => parseFlags(['--topology', 'cluster', '--faults=kill-temporal']), /unknown fault kill-temporal for --topology cluster; known: .*kill-temporal-history/);
  assert.throws(() => parseFlags(['--faults=kill-temporal-matching']), /unknown fault kill-temporal-matching for --topology dev/);
  assert.throws(() => parseFlags(['--topology', 'cluster', '--faults=restart-rabbitmq']), /unknown fault restart-rabbitmq for --topology cluster; known: .*stop-rabbitmq-leader/);
  assert.throws(() => parseFlags(['--faults=stop-rabbitmq-node']), /unknown fault stop-rabbitmq-node for --topology dev/);
  assert.throws(() => parseFlags(['--topology', 'k8s']), /--topology k8s: give dev .* or cluster/);
});
