import { test } from 'node:test';
import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import slugid from 'slugid';
import { eventually } from '../../support/stack.js';
import { graphOf } from '../../support/graphs.js';
import { bridgeQueueName } from '../../src/bridge/bridge.js';
import { useStack } from '../helpers/stackFixture.js';

// Two deployments (own databases, Temporal servers and scheduler ids) on one RabbitMQ vhost, sharing even
// the exchange prefix: the harder case, where only the bridge queue's name and bindings keep them apart.
const prefix = `test-${randomBytes(4).toString('hex')}/`;
const deployments = ['deploy-a', 'deploy-b'].map((schedulerId) => {
  const log: string[] = [];
  const stack = useStack({
    configOverrides: { exchangePrefix: prefix, schedulerId, bridgeSchedulerIds: [schedulerId] },
    log: (line) => log.push(line),
    worker: true,
  });
  return { stack, log };
});

test('two deployments on one vhost: each bridge has its own queue and both graphs finish without waiting for reconciliation', async () => {
  const [a, b] = deployments;
  assert.notEqual(bridgeQueueName(a.stack.config), bridgeQueueName(b.stack.config));
  assert.equal(bridgeQueueName(a.stack.config), `${prefix}tgs/scheduler-bridge/deploy-a`);
  // Chains: every hop is a resolution the graph must hear. Before, about half of them went to the other
  // deployment's bridge, which acked them as unknown; the graph then waited 60 s for reconciliation each time. Now
  // each deployment's relay reads them from its own database (the graph-signal lane).
  const chain = graphOf({ one: {}, two: { requires: ['one'] }, three: { requires: ['two'] }, four: { requires: ['three'] }, five: { requires: ['four'] } });
  const ids = await Promise.all(
    deployments.map(async ({ stack }) => {
      const id = slugid.nice();
      await stack.root.request('scheduler', 'PUT', `/task-graph/${id}`, chain);
      return id;
    }),
  );
  await Promise.all(
    deployments.map(({ stack }, k) =>
      eventually(
        async () => {
          const { status } = await stack.root.request('scheduler', 'GET', `/task-graph/${ids[k]}/status`);
          if (status.state === 'finished') return true;
          throw new Error(`status ${JSON.stringify(status)}; relay stats ${JSON.stringify(deployments[k].stack.relay?.stats)}`);
        },
        `graph of ${stack.config.schedulerId} finished`,
        // well under the 60 s reconciliation that would hide a lost resolution
        30_000,
      ),
    ),
  );
  for (const d of deployments) {
    // The lane counts a resolution once its signal call returns, which can be after the workflow it woke has
    // finished the graph (a busy event loop): wait for the count, not just for the graph.
    const lane = () => d.stack.relay?.stats.resolutionsSignalled ?? 0;
    await eventually(async () => lane() >= 5, `${d.stack.config.schedulerId}: five resolutions signalled`, 5_000).catch(() => undefined);
    // on failure, what this deployment's relay and bridge saw and logged
    const seen = `${d.stack.config.schedulerId}: relay stats ${JSON.stringify(d.stack.relay?.stats)}, bridge stats ${JSON.stringify(d.stack.bridge?.stats)}; log:\n${d.log.join('\n')}`;
    assert.equal(d.stack.bridge?.stats.unknownTasks, 0, `the bridge saw no message of the other deployment (${seen})`);
    assert.ok(lane() >= 5, `the relay's graph-signal lane signalled the five resolutions, from its own database (${seen})`);
    assert.deepEqual(d.log.filter((l) => l.includes('looks shared')), [], seen);
  }
});
