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

/**
 * For a process that drains (`tgs shell-worker`): the first SIGTERM or SIGINT runs `drain` (finish what runs, for a
 * while), a second one runs `stop` (end it now); the process exits once either has finished.
 */
export function onDrainSignals(drain: () => Promise<void>, stop: () => Promise<void>): void {
  let signals = 0;
  const log = logger('process');
  const exit = (p: Promise<void>) =>
    p.then(
      () => process.exit(0),
      (err: unknown) => {
        log.error({ err }, 'tgs: error while shutting down');
        process.exit(1);
      },
    );
  const handler = (signal: NodeJS.Signals) => {
    signals++;
    if (signals === 1) {
      log.info({ signal }, `tgs: ${signal}, draining (a second SIGTERM or SIGINT stops at once)`);
      void exit(drain());
    } else if (signals === 2) {
      log.info({ signal }, `tgs: ${signal} again, stopping at once`);
      void exit(stop());
    } else process.exit(130);
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}
