import type pg from 'pg';

// The deployment's identity, generated once by migration 034 (src/sql/034_deployment.sql) and never changed: a
// database is a deployment. Read once per pool (every process of a deployment reads the same row).

const read = new WeakMap<object, Promise<string>>();

/** This deployment's id (the one row of `tgs_deployment`); a failed read is tried again on the next call. */
export function deploymentIdOf(pool: Pick<pg.Pool, 'query'>): Promise<string> {
  let pending = read.get(pool);
  if (!pending) {
    pending = pool.query<{ deployment_id: string }>('SELECT deployment_id FROM tgs_deployment').then((r) => {
      const id = r.rows[0]?.deployment_id;
      if (!id) throw new Error('tgs_deployment holds no row: run `tgs migrate` (migration 034)');
      return id;
    });
    pending.catch(() => read.delete(pool));
    read.set(pool, pending);
  }
  return pending;
}
