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
// Driven by the taskIds and each one's requires (unnest): index lookups only. Joined the plain way, Postgres
// planned a scan of all the graph's nodes whenever its statistics predated the graph (a freshly stored
// 300,000-task graph: 21–28 s a query, 15 of them running at once, and the graph ran at a third of its speed);
// this shape took 0.1–0.3 s on that same database.
const HOPS_SQL = `SELECT extract(epoch FROM (t.runs -> 0 ->> 'scheduled')::timestamptz - req.resolved)::float8 AS hop
  FROM unnest($2::text[]) AS d(task_id)
  JOIN graph_nodes n ON n.task_graph_id = $1 AND n.task_id = d.task_id
  JOIN tasks t ON t.task_id = n.task_id
  CROSS JOIN LATERAL (
    SELECT max((rt.runs -> -1 ->> 'resolved')::timestamptz) AS resolved
    FROM unnest(n.requires) AS q(idx)
    JOIN graph_nodes r ON r.task_graph_id = n.task_graph_id AND r.idx = q.idx
    JOIN tasks rt ON rt.task_id = r.task_id
  ) req`;

/** Pools with a hop query in flight: a metric sample never queues behind another. */
const measuring = new WeakSet<pg.Pool>();

/**
 * Observes tgs_graph_hop_seconds for the tasks, after the dispatch committed and without being awaited: one
 * indexed query per dispatched batch (up to 1,000 tasks), off the workflow's path. A sample: while one is in
 * flight on this pool, batches dispatched meanwhile are not measured, so the metric never costs more than one
 * connection's worth of Postgres however fast dispatch goes.
 */
export function observeHops(pool: pg.Pool, taskGraphId: string, taskIds: string[], log?: Logger): void {
  if (measuring.has(pool)) return;
  measuring.add(pool);
  pool
    .query<{ hop: number | null }>(prepared(HOPS_SQL, [taskGraphId, taskIds]))
    .then(
      ({ rows }) => {
        for (const { hop } of rows) if (hop !== null) graphHop.observe(Math.max(0, hop));
      },
      (err: unknown) => log?.debug({ taskGraphId, err: (err as Error).message }, 'hop metric not measured'),
    )
    .finally(() => measuring.delete(pool));
}
