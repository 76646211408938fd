import type { Command } from 'commander';
import { createPool } from '../../db/pool.js';
import { startBridge } from '../../bridge/bridge.js';
import { startHookListener } from '../../hooks/listener.js';
import { lineLogger } from '../../log.js';
import { observeBridge, observeHookListener } from '../../observability/metrics.js';
import { LazyTemporalClient } from '../../temporal/connection.js';
import { registerService } from '../service.js';
import { onShutdown } from '../shutdown.js';

export function registerBridgeCommand(program: Command): void {
  registerService(program, 'bridge', 'forward task resolutions from RabbitMQ to task-graph workflows as batched signals', async ({ config, log, metrics }) => {
    const pool = createPool(config.databaseUrl, 5);
    const temporal = new LazyTemporalClient(config);
    const bridge = await startBridge({ config, pool, temporal: () => temporal.get(), log: lineLogger(log) });
    // hooks' bindings are acted on here, beside the bridge (why: src/hooks/listener.ts)
    const hookListener = await startHookListener({ config, pool, temporal, log: lineLogger(log) });
    const unobserve = observeBridge(bridge.stats);
    const unobserveHooks = observeHookListener(hookListener.stats);
    // Counts every 30 s so an operator sees the bridge working (also in tgs_bridge_* metrics).
    const timer = setInterval(() => log.info({ stats: bridge.stats, hookListener: hookListener.stats }, 'bridge stats'), 30_000);
    onShutdown(async () => {
      clearInterval(timer);
      unobserve();
      unobserveHooks();
      await hookListener.stop();
      await bridge.stop();
      await temporal.close();
      await metrics?.close();
      await pool.end();
    });
  });
}
