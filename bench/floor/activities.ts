import type pg from 'pg';

export function createFloorActivities(pool: pg.Pool, onTouched: (n: number) => void) {
  return {
    async touch(n: number): Promise<void> {
      await pool.query('UPDATE bench_floor SET n = $1 WHERE id = 1', [n]);
      onTouched(n);
    },
  };
}
export type FloorActivities = ReturnType<typeof createFloorActivities>;
