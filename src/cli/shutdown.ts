/** Runs the cleanup once on SIGINT/SIGTERM, then exits; a second signal exits at once. */
export function onShutdown(cleanup: () => Promise<void>): void {
  let stopping = false;
  const handler = (signal: NodeJS.Signals) => {
    if (stopping) process.exit(130);
    stopping = true;
    console.error(`tgs: ${signal}, shutting down`);
    cleanup().then(
      () => process.exit(0),
      (err: unknown) => {
        console.error('tgs: error while shutting down:', err);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', handler);
  process.on('SIGTERM', handler);
}
