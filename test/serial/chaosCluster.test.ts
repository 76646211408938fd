import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { runChaos } from '../../bench/chaos/harness.js';
import { renderChaosTable } from '../../bench/chaos/report.js';
import { clusterServices, machineServices } from '../../bench/chaos/options.js';
import { postgresVersion } from '../../bench/chaos/services.js';
import * as rabbitmqCluster from '../../scripts/rabbitmqCluster.js';

// The chaos suite small on the production topology: a Temporal cluster (four processes on Postgres) and a
// three-node RabbitMQ cluster (scripts/rabbitmqCluster.ts). It stops neither the machine's Postgres nor its RabbitMQ
// node; it runs alone (test/serial) because the RabbitMQ cluster's nodes have fixed names and ports, which
// test/serial/rabbitmqCluster.test.ts starts and stops too, and a Temporal cluster takes up to 32 of Postgres' 100
// connections.
test('chaos on the clusters, short: a SIGKILL of Temporal history and of matching, a frontend restart, the bridge queue leader stopped and another RabbitMQ node stopped lose no graph', { timeout: 420_000 }, async () => {
  const lines: string[] = [];
  const log = (line: string) => {
    line = `${new Date().toISOString().slice(11, 19)} ${line}`;
    lines.push(line);
    if (process.env.TGS_TEST_VERBOSE) console.error(line);
  };
  const cluster = await rabbitmqCluster.start({ say: (line) => log(`rabbitmq cluster: ${line}`) });
  let passed = false;
  try {
    const result = await runChaos({
      concurrentGraphs: 6,
      totalTasks: 150,
      faults: ['kill-temporal-history', 'kill-temporal-matching', 'restart-temporal-frontend', 'stop-rabbitmq-leader', 'stop-rabbitmq-node'],
      combined: [],
      downMs: 1000,
      workerSlots: 6,
      claimBatch: 4,
      taskMaxMs: 100,
      claimTimeoutSeconds: 20,
      settleTimeoutMs: 120_000,
      services: clusterServices(machineServices(postgresVersion()), cluster),
      topology: 'cluster',
      log,
    });
    log(`\n${renderChaosTable(result)}`);
    assert.ok(result.tasks >= 150, `${result.tasks} tasks ran`);
    for (const c of result.checks) assert.ok(c.ok, `${c.name}: ${c.failures.join('; ')}\n(logs in ${result.logDir})`);
    assert.equal(result.faults.length, 5);
    for (const f of result.faults) {
      assert.equal(f.errors, undefined, `${f.fault} could not be injected: ${f.errors?.join('; ')}`);
      assert.notEqual(f.progressMs, null, `no progress after ${f.fault}`);
      assert.equal(f.lost, 0, `${f.fault} lost messages`);
    }
    // each RabbitMQ fault names the node it stopped: the queue's leader, then one that did not lead it then
    const stopped = result.faults.slice(3).map((f) => /\((rabbit-[abc]@localhost)\)/.exec(f.fault)?.[1]);
    assert.ok(stopped.every(Boolean), `stopped nodes: ${result.faults.slice(3).map((f) => f.fault).join(', ')}`);
    passed = true;
    rmSync(result.logDir, { recursive: true, force: true });
  } catch (err) {
    console.error(lines.join('\n'));
    throw err;
  } finally {
    // a failed run keeps the cluster (its vhost holds the run's queues) for diagnosis
    if (passed) rabbitmqCluster.stop({ say: (line) => log(`rabbitmq cluster: ${line}`) });
    else console.error('RabbitMQ cluster kept for diagnosis; stop it with: node --import tsx scripts/rabbitmqCluster.ts stop');
  }
});
