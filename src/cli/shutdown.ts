import { logger } from '../log.js';

/** Runs the cleanup once on SIGINT/SIGTERM, then exits; a second signal exits at once. */
export function onShutdown(cleanup: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(130);
    stopping = true;
    const log = logger('process');
    log.info({ signal }, `tgs: ${signal}, shutting down`);
    cleanup().then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'tgs: error while shutting down');
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}
