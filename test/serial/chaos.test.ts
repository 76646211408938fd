import { test } from 'node:test';
import assert from 'node:assert/strict';
import { rmSync } from 'node:fs';
import { runChaos } from '../../bench/chaos/harness.js';
import { machineServices } from '../../bench/chaos/options.js';
import { postgresVersion, startPrivateServices } from '../../bench/chaos/services.js';

// The chaos suite small: it restarts RabbitMQ and kills processes, so it runs alone (test/serial).
// TGS_CHAOS_SERVICES=private runs it against a private Postgres cluster and RabbitMQ node instead of the
// machine's (while others' tests run).
test('chaos, short: a SIGKILL of every tgs process type, an API SIGTERM, a RabbitMQ restart and a Temporal SIGKILL lose no graph', { timeout: 300_000 }, async () => {
  const privateServices = process.env.TGS_CHAOS_SERVICES === 'private' ? startPrivateServices({ pgPort: 5434, amqpPort: 5674 }) : undefined;
  const lines: string[] = [];
  try {
    const result = await runChaos({
      concurrentGraphs: 10,
      totalTasks: 300,
      faults: ['kill-api-1', 'kill-relay-1', 'kill-bridge-1', 'kill-scheduler-worker-1', 'term-api-2', 'restart-rabbitmq', 'kill-temporal'],
      combined: [],
      downMs: 1000,
      workerSlots: 8,
      claimBatch: 4,
      taskMaxMs: 100,
      claimTimeoutSeconds: 20,
      settleTimeoutMs: 120_000,
      services: privateServices?.control ?? machineServices(postgresVersion()),
      log: (line) => {
        line = `${new Date().toISOString().slice(11, 19)} ${line}`;
        lines.push(line);
        if (process.env.TGS_TEST_VERBOSE) console.error(line);
      },
    });
    assert.ok(result.tasks >= 300, `${result.tasks} tasks ran`);
    for (const c of result.checks) assert.ok(c.ok, `${c.name}: ${c.failures.join('; ')}\n(logs in ${result.logDir})`);
    for (const f of result.faults) {
      assert.notEqual(f.progressMs, null, `no progress after ${f.fault}`);
      assert.equal(f.lost, 0, `${f.fault} lost messages`);
      assert.equal(f.errors, undefined, `${f.fault} could not be injected: ${f.errors?.join('; ')}`);
    }
    // passed: the process logs and the Temporal history are not needed
    rmSync(result.logDir, { recursive: true, force: true });
  } catch (err) {
    console.error(lines.join('\n'));
    throw err;
  } finally {
    privateServices?.stop();
  }
});
