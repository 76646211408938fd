import type pg from 'pg';
import type { Config } from '../config.js';
import { withTransaction } from '../db/pool.js';
import { deploymentIdOf } from '../db/deployment.js';
import type { LazyTemporalClient } from '../temporal/connection.js';
import { startGraphWorkflow } from './startWorkflow.js';

// A graph younger than this is left to the request that created it (which starts its workflow right after the
// commit); the sweep would only double that start call. Starting it anyway would be harmless (idempotent).
const GRACE_SECONDS = 5;
const BATCH = 100;

/**
 * Starts the workflow of every graph committed over HTTP whose workflow has not announced itself: Temporal was
 * down at the commit, or the API died between the commit and the start. The start is idempotent (an existing
 * workflow, running or closed, answers "already started", which is fine), and every graph it answered for is
 * marked, so each graph costs Temporal one call. Safe with several API processes: rows are taken with
 * SKIP LOCKED, and only once Temporal answered, so no row lock waits on an unreachable server.
 */
export async function startMissingWorkflows(pool: pg.Pool, config: Config, temporal: LazyTemporalClient): Promise<number> {
  const { rows: any } = await pool.query(
    `SELECT 1 FROM task_graphs WHERE NOT workflow_started AND origin = 'graph' AND created < now() - interval '${GRACE_SECONDS} seconds' LIMIT 1`,
  );
  if (any.length === 0) return 0;
  // Throws (the sweep logs it once) while Temporal is unreachable, before any row is locked.
  await temporal.get();
  // read now, outside the transaction (startGraphWorkflow reads it through the pool; PGlite has one session)
  await deploymentIdOf(pool);
  return withTransaction(pool, async (client) => {
    const { rows } = await client.query<{ task_graph_id: string; routing: string; task_count: number; name: string | null }>(
      `SELECT task_graph_id, routing, task_count, metadata->>'name' AS name FROM task_graphs
       WHERE NOT workflow_started AND origin = 'graph' AND created < now() - interval '${GRACE_SECONDS} seconds'
       ORDER BY created LIMIT ${BATCH} FOR UPDATE SKIP LOCKED`,
    );
    const started: string[] = [];
    for (const row of rows) {
      await startGraphWorkflow(temporal, config, pool, {
        taskGraphId: row.task_graph_id,
        routing: row.routing,
        taskCount: row.task_count,
        ...(row.name ? { name: row.name } : {}),
      });
      started.push(row.task_graph_id);
    }
    if (started.length > 0) await client.query('UPDATE task_graphs SET workflow_started = true WHERE task_graph_id = ANY($1)', [started]);
    return started.length;
  });
}
