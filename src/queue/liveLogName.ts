/**
 * The artifact a worker writes a run's log to, as Taskcluster's workers do; the CLI and the web UI read it there.
 * No imports: the browser bundle takes it too.
 */
export const LIVE_LOG = 'public/logs/live.log';
