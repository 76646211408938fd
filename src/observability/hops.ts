import type pg from 'pg';
import type { Logger } from 'pino';
import { prepared } from '../db/pool.js';
import { graphHop } from './metrics.js';

/**
 * For each task of a graph that just became pending, the time from the latest resolution among its
 * requirements (the run's `resolved`, written by the API that took the report) to its own `scheduled`
 * (written by the dispatch activity): one hop of the graph. Roots have no requirements and no hop. The two
 * timestamps come from two processes' clocks; on one host (or NTP-synced hosts) that is ms-accurate.
 */
const HOPS_SQL = `SELECT extract(epoch FROM (min(t.runs -> 0 ->> 'scheduled'))::timestamptz
                                     - max((rt.runs -> -1 ->> 'resolved')::timestamptz))::float8 AS hop
  FROM graph_nodes n
  JOIN tasks t ON t.task_id = n.task_id
  JOIN graph_nodes r ON r.task_graph_id = n.task_graph_id AND r.idx = ANY(n.requires)
  JOIN tasks rt ON rt.task_id = r.task_id
  WHERE n.task_graph_id = $1 AND n.task_id = ANY($2)
  GROUP BY n.task_id`;

/**
 * Observes tgs_graph_hop_seconds for the tasks, after the dispatch committed and without being awaited:
 * one indexed query per dispatched batch (up to 1,000 tasks), off the workflow's path.
 */
export function observeHops(pool: pg.Pool, taskGraphId: string, taskIds: string[], log?: Logger): void {
  pool.query<{ hop: number | null }>(prepared(HOPS_SQL, [taskGraphId, taskIds])).then(
    ({ rows }) => {
      for (const { hop } of rows) if (hop !== null) graphHop.observe(Math.max(0, hop));
    },
    (err: unknown) => log?.debug({ taskGraphId, err: (err as Error).message }, 'hop metric not measured'),
  );
}
