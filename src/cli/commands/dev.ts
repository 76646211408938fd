import type { Command } from 'commander';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { loadConfig } from '../../config.js';
import { buildApi } from '../../api/app.js';
import { startRelay } from '../../exchanges/relay.js';
import { startBridge } from '../../bridge/bridge.js';
import { createSchedulerWorker, ensureSearchAttributes } from '../../worker.js';
import { freePort, startDevServer, type DevServer } from '../../temporal/devServer.js';
import { generateAccessToken } from '../../auth/clients.js';
import { ROOT_CLIENT_ID } from '../../config.js';
import { onShutdown } from '../shutdown.js';

/**
 * `tgs dev`: the whole system in one command — a Temporal dev server (unless TEMPORAL_ADDRESS is set),
 * the API, the outbox relay, the bridge and the scheduler worker — against the Postgres and RabbitMQ
 * of DATABASE_URL / AMQP_URL (defaults: localhost).
 */
export function registerDevCommand(program: Command): void {
  program
    .command('dev')
    .description('run Temporal (dev server), the API, relay, bridge and scheduler worker in one process')
    .option('--port <port>', 'API port (a taken port falls back to a free one)', '8080')
    .option('--temporal-port <port>', 'Temporal dev server port', '7233')
    .option('--ui-port <port>', 'Temporal Web UI port', '8233')
    .option('--data-dir <dir>', 'where the Temporal dev server keeps its state', '.tgs')
    .action(async (opts: { port: string; temporalPort: string; uiPort: string; dataDir: string }) => {
      const env = process.env;
      let temporal: DevServer | undefined;
      let temporalAddress = env.TEMPORAL_ADDRESS;
      if (!temporalAddress) {
        mkdirSync(opts.dataDir, { recursive: true });
        const port = await freePort(Number(opts.temporalPort));
        const uiPort = await freePort(Number(opts.uiPort));
        console.log(`tgs dev: starting a Temporal dev server on 127.0.0.1:${port} (state in ${path.join(opts.dataDir, 'temporal.db')})`);
        temporal = await startDevServer({
          port,
          uiPort,
          headless: false,
          dbFilename: path.join(opts.dataDir, 'temporal.db'),
          searchAttributes: { TaskGraphState: 'Keyword', TaskGraphSchedulerId: 'Keyword' },
        });
        temporalAddress = temporal.address;
      } else {
        console.log(`tgs dev: using the Temporal server at ${temporalAddress} (TEMPORAL_ADDRESS)`);
      }
      const apiPort = await freePort(Number(opts.port));
      const rootAccessToken = env.TGS_ROOT_ACCESS_TOKEN || generateAccessToken();
      const config = loadConfig(env, {
        temporalAddress,
        port: apiPort,
        rootAccessToken,
        rootUrl: (env.TGS_ROOT_URL || `http://127.0.0.1:${apiPort}`).replace(/\/+$/, ''),
      });
      const api = await buildApi(config);
      await api.listen();
      const relay = await startRelay({ config, pool: api.deps.pool, log: (l: string) => console.log(`relay: ${l}`) });
      await ensureSearchAttributes(config);
      const bridge = await startBridge({ config, pool: api.deps.pool, temporal: () => api.deps.temporal.get(), log: (l) => console.log(l) });
      const { worker, connection } = await createSchedulerWorker({ config, pool: api.deps.pool });
      const running = worker.run();
      console.log('');
      console.log(`  API            ${config.rootUrl}/api/queue/v1/ping  ${config.rootUrl}/api/scheduler/v1/ping`);
      if (temporal?.uiPort) console.log(`  Temporal UI    http://127.0.0.1:${temporal.uiPort}`);
      console.log(`  Temporal       ${temporalAddress} (namespace ${config.temporalNamespace}, task queue ${config.temporalTaskQueue})`);
      console.log('  credentials    (for tgs commands in another shell)');
      console.log(`    export TGS_ROOT_URL=${config.rootUrl}`);
      console.log(`    export TGS_CLIENT_ID=${ROOT_CLIENT_ID}`);
      console.log(`    export TGS_ACCESS_TOKEN=${rootAccessToken}`);
      console.log('');
      console.log('tgs dev is running; Ctrl-C stops everything.');
      onShutdown(async () => {
        worker.shutdown();
        await running;
        await connection.close();
        await bridge.stop();
        await relay.stop();
        await api.close();
        await temporal?.stop();
      });
      await running;
    });
}
