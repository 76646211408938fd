import type { Command } from 'commander';
import { loadConfig, type Config } from '../config.js';
import type { Logger } from '../log.js';
import type { MetricsServer } from '../observability/metricsServer.js';
import { startObservability } from '../observability/process.js';

export interface Service {
  config: Config;
  /** lines named after the command */
  log: Logger;
  /** the /metrics server, when TGS_METRICS_PORT asks for one (the command closes it on shutdown) */
  metrics?: MetricsServer;
}

/**
 * Registers one of the long-running commands (`api`, `bridge`, `relay`, `scheduler-worker`): each loads the
 * configuration and starts its logs and metrics, named after the command, before `start`.
 */
export function registerService(program: Command, name: string, description: string, start: (service: Service) => Promise<void>): void {
  program
    .command(name)
    .description(description)
    .action(async () => {
      const config = loadConfig();
      const { log, metrics } = await startObservability(config, name);
      await start({ config, log, metrics });
    });
}
