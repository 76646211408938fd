import type { Command } from 'commander';
import { loadConfig } from '../../config.js';
import { buildApi } from '../../api/app.js';
import { onShutdown } from '../shutdown.js';

export function registerApiCommand(program: Command): void {
  program
    .command('api')
    .description('serve the queue and scheduler HTTP APIs (applies migrations first)')
    .action(async () => {
      const config = loadConfig();
      const api = await buildApi(config);
      const address = await api.listen();
      console.log(`tgs api listening on ${address} (rootUrl ${config.rootUrl})`);
      onShutdown(() => api.close());
    });
}
