import type { Command } from 'commander';
import { buildApi } from '../../processes/api.js';
import { registerService } from '../service.js';
import { onShutdown } from '../shutdown.js';
import { untilConnected } from '../../untilConnected.js';
import { ensureDatabase } from '../../db/migrate.js';

export function registerApiCommand(program: Command): void {
  registerService(program, 'api', 'serve the queue and scheduler HTTP APIs (applies migrations first)', async ({ config, log, metrics }) => {
    // Started together with (or before) Postgres: wait for it instead of exiting.
    const waited = untilConnected('Postgres', () => ensureDatabase(config.databaseUrl, (line) => log.info(line)), (line) => log.warn(`tgs api: ${line}`));
    const api = await waited.then(() => buildApi(config, { logger: log })).catch(async (err: unknown) => {
      await metrics?.close();
      throw err;
    });
    const address = await api.listen();
    log.info({ address, rootUrl: config.rootUrl }, `tgs api listening on ${address} (rootUrl ${config.rootUrl})`);
    onShutdown(async () => {
      await api.close();
      await metrics?.close();
    });
  });
}
