import type pg from 'pg';

/**
 * The bench runs with autovacuum on, as a deployment does (docs/deployments.md), whatever the server was set to:
 * a Postgres whose configuration turns it off (this machine's image does) would otherwise measure a queue that is
 * never vacuumed during a scenario, and plans that are never remade from fresh statistics. Both were measured on a
 * 100,000-task graph (docs/bench-journal/2026-11-26.md): with autovacuum off the claim walked 661 buffers of dead index entries a
 * call, and a plan of the bridge's that only autovacuum's analyze brought about (0.7 s a call) went unseen.
 *
 * Turned on for the run with ALTER SYSTEM (a superuser's), and the server's own setting put back when `restore` is
 * called: ALTER SYSTEM RESET, or SET off again where postgresql.auto.conf itself held `off`. A role that may not do
 * that leaves the server as it is, and the run says so. `keep`: never change the server (--server-autovacuum).
 */
export async function autovacuumForRun(pool: pg.Pool, log: (line: string) => void, keep: boolean): Promise<{ setting: string; restore: () => Promise<void> }> {
  const { rows } = await pool.query<{ setting: string; sourcefile: string | null; superuser: boolean }>(
    `SELECT setting, sourcefile, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser FROM pg_settings WHERE name = 'autovacuum'`,
  );
  const { setting, sourcefile, superuser } = rows[0];
  const unchanged = { setting, restore: async () => undefined };
  if (setting === 'on' || keep) return unchanged;
  if (!superuser) {
    log('autovacuum is off on this server and this role may not turn it on: the figures are of a queue never vacuumed during a scenario');
    return unchanged;
  }
  await pool.query('ALTER SYSTEM SET autovacuum = on');
  await pool.query('SELECT pg_reload_conf()');
  log('autovacuum is off on this server: on for this run (ALTER SYSTEM), as in a deployment; the server\'s setting comes back at the end');
  return {
    setting: 'on for the run (off on the server)',
    restore: async () => {
      await pool.query(sourcefile?.endsWith('postgresql.auto.conf') ? 'ALTER SYSTEM SET autovacuum = off' : 'ALTER SYSTEM RESET autovacuum');
      await pool.query('SELECT pg_reload_conf()');
      log('autovacuum: the server\'s own setting (off) is back');
    },
  };
}
