import type pg from 'pg';

// The deployment's identity and secrets, generated once by their migrations and never changed by tgs: a database is
// a deployment. Each read once per pool (every process of a deployment reads the same row).

const reads = new Map<string, WeakMap<object, Promise<string>>>();

/** A column of the one row of `tgs_deployment`, read once per pool; a failed read is tried again on the next call. */
function deploymentColumn(pool: Pick<pg.Pool, 'query'>, column: 'deployment_id' | 'hook_fire_key', migration: string): Promise<string> {
  let read = reads.get(column);
  if (!read) reads.set(column, (read = new WeakMap()));
  let pending = read.get(pool);
  if (!pending) {
    pending = pool.query<Record<string, string>>(`SELECT ${column} FROM tgs_deployment`).then((r) => {
      const value = r.rows[0]?.[column];
      if (!value) throw new Error(`tgs_deployment holds no ${column}: run \`tgs migrate\` (migration ${migration})`);
      return value;
    });
    pending.catch(() => read.delete(pool));
    read.set(pool, pending);
  }
  return pending;
}

/** This deployment's id (migration 034, src/sql/034_deployment.sql). */
export const deploymentIdOf = (pool: Pick<pg.Pool, 'query'>): Promise<string> => deploymentColumn(pool, 'deployment_id', '034');

/** The secret hook fire ids are derived from (migration 036, src/hooks/fireTaskId.ts). */
export const hookFireKeyOf = (pool: Pick<pg.Pool, 'query'>): Promise<string> => deploymentColumn(pool, 'hook_fire_key', '044');
