import { anyOf, prepared, type Queryable } from '../db/pool.js';
import { isResolved, type ResolvedState } from '../taskStates.js';

/** A task's latest run as stored: its runId (-1 without runs), state and reasonResolved, and the task's deadline. */
export interface LatestRun {
  task_id: string;
  run_id: number;
  state: string | null;
  reason: string | null;
  deadline: Date;
}

/**
 * The latest run of each of these tasks that exists, in one statement: the bridge checks a resolution message (one an
 * earlier binding queued; the relay's graph-signal lane checks the same in SQL, src/relay/graphSignalStore.ts)
 * against it (so a forged or stale message never reaches a graph), the scheduler's activities report the resolved
 * ones back to a graph and rerun only a run the workflow saw resolve.
 * - `resolved`: only tasks whose latest run is resolved (a reconcile asks about many tasks, most of them unresolved);
 * - `forUpdate`: the rows stay locked until the transaction ends (a rerun decided on them).
 * The array through anyOf: the bridge asks at every flush, mostly about one to four tasks, and with a bare `= ANY($1)`
 * Postgres planned the statement again at every call (pg_prepared_statements: 24 custom plans of 24 calls).
 */
export async function latestRuns(db: Queryable, taskIds: string[], options: { resolved?: boolean; forUpdate?: boolean } = {}): Promise<LatestRun[]> {
  if (taskIds.length === 0) return [];
  const { rows } = await db.query<LatestRun>(prepared(`${latestRunsSql('$1', options)}${options.forUpdate ? ' FOR UPDATE' : ''}`, [taskIds]));
  return rows;
}

/**
 * SQL: latestRuns' read (without its lock) of the tasks of the text[] parameter `param`, as rows of LatestRun; the
 * dispatch's one statement (src/activities/dispatchInOne.ts) reads the resolved ones through it.
 */
export const latestRunsSql = (param: string, options: { resolved?: boolean }) =>
  `SELECT task_id, jsonb_array_length(runs) - 1 AS run_id, runs->-1->>'state' AS state, runs->-1->>'reasonResolved' AS reason, deadline
         FROM tasks WHERE task_id = ${anyOf(param, 'text')}${options.resolved ? ` AND state IN ('completed', 'failed', 'exception')` : ''}`;

/** A resolved latest run as a graph hears it (src/workflows/contract.ts's Resolution). */
export function runResolution(row: Pick<LatestRun, 'task_id' | 'run_id' | 'state' | 'reason'>): { taskId: string; runId: number; state: ResolvedState; reasonResolved?: string } | undefined {
  if (row.state === null || !isResolved(row.state)) return undefined;
  return { taskId: row.task_id, runId: row.run_id, state: row.state, ...(row.reason ? { reasonResolved: row.reason } : {}) };
}
