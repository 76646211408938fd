import type { Logger } from 'pino';
import type { Config } from '../config.js';
import { logger } from '../log.js';
import { startMetricsServer, type MetricsServer } from './metricsServer.js';

/**
 * What every long-running tgs command starts with: its role's logger, and with TGS_METRICS_PORT its
 * metrics server (on HOST, like the API). An error nothing caught (an unhandled rejection
 * included) still ends the process, as a fatal log line instead of a bare stack.
 */
export async function startObservability(config: Config, role: string): Promise<{ log: Logger; metrics?: MetricsServer }> {
  const log = logger(role);
  process.on('uncaughtException', (err) => {
    log.fatal({ err }, 'uncaught exception');
    process.exit(1);
  });
  const metrics = config.metricsPort > 0 ? await startMetricsServer({ port: config.metricsPort, host: config.host, log }) : undefined;
  return { log, metrics };
}
