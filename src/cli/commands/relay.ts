import type { Command } from 'commander';
import { createPool } from '../../db/pool.js';
import { startRelay } from '../../relay/relay.js';
import { lineLogger } from '../../log.js';
import { observeRelay } from '../../observability/metrics.js';
import { LazyTemporalClient } from '../../temporal/connection.js';
import { registerService } from '../service.js';
import { onShutdown } from '../shutdown.js';

export function registerRelayCommand(program: Command): void {
  registerService(program, 'relay', 'publish the Postgres outbox to RabbitMQ and signal task-graph workflows the resolutions it reads (one active relay at a time; others stand by)', async ({ config, log, metrics }) => {
    // The relay's own pool publishes; the outbox gauges read through this one so a scrape never waits behind a batch.
    const pool = createPool(config.databaseUrl, 1);
    // the graph-signal lane's client (src/relay/graphSignalLane.ts), connected on first use: the relay publishes while Temporal comes up
    const temporal = new LazyTemporalClient(config);
    const relay = await startRelay({ config, log: lineLogger(log), temporal: () => temporal.get() });
    const unobserve = observeRelay(config.databaseUrl, pool, relay.stats);
    // Counts every 30 s so an operator sees the relay working (also in tgs_relay_* metrics).
    const timer = setInterval(() => log.info({ stats: relay.stats }, 'relay stats'), 30_000);
    onShutdown(async () => {
      clearInterval(timer);
      unobserve();
      await relay.stop();
      await temporal.close();
      await metrics?.close();
      await pool.end();
    });
  });
}
