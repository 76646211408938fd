import { prepared, type Queryable } from '../db/pool.js';
import type { Resolution } from '../workflows/contract.js';

/**
 * The graph-signal lane's statements on graph_signals (migration 042): the recording the relay's outbox read makes
 * in its own statement (src/relay/outboxStore.ts), the read of what a relay left behind, the delete of what Temporal
 * accepted. The loop that signals is src/relay/graphSignalLane.ts.
 */

/** A row of graph_signals: one resolution for one graph that hears it. */
export interface GraphSignalRow {
  task_graph_id: string;
  message_id: string;
  origin: string;
  resolution: Resolution;
  /** when the row was recorded (epoch ms): the lag metric's start */
  recorded_at: number;
}

/**
 * SQL: a data-modifying CTE body over the outbox rows `r` of a read. For each resolution message (a task-completed,
 * -failed or -exception row, rendered or written whole) whose task's stored latest run is the message's run, in the
 * message's state, one row per graph that hears the task (GRAPHS_HEARING_SQL's join, src/scheduler/graphStore.ts: a
 * node of a live graph, or of a graph of origin `queue`), the resolution taken from the stored row as the bridge's
 * check takes it (src/queue/latestRuns.ts runResolution). A message overtaken by a later run (a rerun was quicker) is
 * not recorded, as the bridge acks such a message unforwarded. Inserted ON CONFLICT DO NOTHING: an outbox row read
 * again (its batch failed and is published again) is recorded once; RETURNING gives the rows new to the table, which
 * the relay signals at once. A runId that is no JSON number, or a payload without a task, matches no task: the read
 * never fails on a row (such a row is the dead-letter move's business, src/relay/outboxMessage.ts).
 */
const RECORDED_AT = '(extract(epoch FROM created) * 1000)::float8 AS recorded_at';

export const RECORD_SIGNALS_SQL = `INSERT INTO graph_signals (task_graph_id, message_id, origin, resolution)
    SELECT n.task_graph_id, m.message_id, g.origin,
           jsonb_strip_nulls(jsonb_build_object('taskId', t.task_id, 'runId', jsonb_array_length(t.runs) - 1, 'state', t.runs->-1->>'state',
             'reasonResolved', NULLIF(t.runs->-1->>'reasonResolved', '')))
      FROM (SELECT r.message_id, COALESCE(r.payload->'row'->>'task_id', r.payload->'status'->>'taskId') AS task_id,
                   substring(COALESCE(r.render, r.exchange) FROM '(?:^|queue/v1/)task-(completed|failed|exception)$') AS state,
                   CASE WHEN jsonb_typeof(r.payload->'runId') = 'number' THEN (r.payload->>'runId')::numeric END AS run_id
              FROM r) m
      JOIN tasks t ON t.task_id = m.task_id AND jsonb_array_length(t.runs) - 1 = m.run_id AND t.runs->-1->>'state' = m.state
      JOIN graph_nodes n ON n.task_id = m.task_id
      JOIN task_graphs g ON g.task_graph_id = n.task_graph_id || '' AND (g.state IN ('running', 'blocked') OR g.origin = 'queue')
     WHERE m.state IS NOT NULL
    ON CONFLICT DO NOTHING
    RETURNING task_graph_id, message_id, origin, resolution, ${RECORDED_AT}`;

/** The most rows a load of what is left reads at once (a relay that finds more reads again once these are signalled). */
export const LEFT_BATCH = 5000;

/** What is left in the lane: the oldest LEFT_BATCH rows, a graph's in the order they were recorded. */
const READ_LEFT = `SELECT task_graph_id, message_id, origin, resolution, ${RECORDED_AT} FROM graph_signals ORDER BY created, task_graph_id, message_id LIMIT ${LEFT_BATCH}`;

/** Deletes the rows ($1[i], $2[i]): their graph accepted its signal, or its workflow has ended. */
const DELETE_SIGNALLED = `DELETE FROM graph_signals WHERE (task_graph_id, message_id) IN (SELECT * FROM unnest($1::text[], $2::text[]))`;

/**
 * A row as read back, its resolution with the keys in the order the bridge's (src/queue/latestRuns.ts runResolution)
 * has them: jsonb keeps keys shortest first, and a signal's payload in a workflow's history is read by people and tools.
 */
export function signalRow(row: GraphSignalRow): GraphSignalRow {
  const { taskId, runId, state, reasonResolved } = row.resolution;
  return { ...row, resolution: { taskId, runId, state, ...(reasonResolved ? { reasonResolved } : {}) } };
}

/** The rows a relay left behind (its signals were never sent, or never accepted): at most LEFT_BATCH. */
export async function readLeftSignals(db: Queryable): Promise<GraphSignalRow[]> {
  return (await db.query<GraphSignalRow>(prepared(READ_LEFT, []))).rows.map(signalRow);
}

/** Deletes signalled rows. */
export async function deleteSignalled(db: Queryable, rows: Pick<GraphSignalRow, 'task_graph_id' | 'message_id'>[]): Promise<void> {
  if (rows.length === 0) return;
  await db.query(prepared(DELETE_SIGNALLED, [rows.map((r) => r.task_graph_id), rows.map((r) => r.message_id)]));
}
