import type { Queryable } from './pool.js';

/**
 * Warns once at start when the Postgres server runs without autovacuum (or without the statistics it needs).
 * Every claim, report and outbox row leaves dead rows in `tasks` and `outbox`; without autovacuum they pile up in
 * the indexes the claim, the task-group check and the relay walk, and the statistics the planner made each named
 * statement's plan from never change. Measured on the bench's queue scenario (5,000 tasks claimed and completed;
 * pg_stat_statements): the task-group check took 10.5 ms a call with autovacuum off against under 1 ms with the
 * tables vacuumed every 10 s, the bridge's check of stored runs 3.7 against 0.8 ms, the relay's delete 0.30 against
 * 0.07 ms; the gap grows the longer tgs runs. Returns whether it warned.
 */
export async function warnWithoutAutovacuum(db: Queryable, warn: (line: string) => void): Promise<boolean> {
  const { rows } = await db.query<{ autovacuum: string; track_counts: string }>(
    "SELECT current_setting('autovacuum') AS autovacuum, current_setting('track_counts') AS track_counts",
  );
  const off = [rows[0].autovacuum !== 'on' && 'autovacuum', rows[0].track_counts !== 'on' && 'track_counts'].filter(Boolean);
  if (off.length === 0) return false;
  warn(
    `WARNING Postgres runs with ${off.join(' and ')} off: tgs's tasks and outbox tables change with every claim and report, and without ` +
      'autovacuum their dead rows and stale statistics slow every claim and report more the longer tgs runs. Turn it on ' +
      '(postgresql.conf: autovacuum = on, track_counts = on; docs/deployments.md says why)',
  );
  return true;
}
