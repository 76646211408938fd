import { declare, type JsonSchema } from '../../api/endpoint.js';
import { SLUGID } from '../../api/patterns.js';
import { TgsError } from '../../errors.js';
import type { GraphRow } from '../graphStore.js';
import { encodeStates, graphHeader, graphHeaderSchema, stateArraysSchema, TASK_STATE_COLUMNS, type TaskStateRow } from './layoutEndpoint.js';

/** How often a waiting request looks again: a change reaches the page well within a second. */
export const CHANGES_POLL_MS = 200;
const DEFAULT_WAIT_S = 20;

/**
 * One statement, so one snapshot: the graph row, the tasks of the graph whose state changed in a transaction
 * not visible in `since` (see src/sql/014_ui_changes.sql), and this snapshot as the next cursor. External nodes
 * (tasks of other groups) are found through graph_nodes_external.
 */
const CHANGES_SQL = `
  SELECT g.*, pg_current_snapshot()::text AS cursor,
         (g.change_xid IS NOT NULL AND NOT pg_visible_in_snapshot(g.change_xid, $2::pg_snapshot)) AS graph_changed,
         (SELECT coalesce(json_agg(c), '[]') FROM (
            SELECT t.task_id, ${TASK_STATE_COLUMNS} FROM tasks t
            WHERE t.task_group_id = $1 AND t.change_xid IS NOT NULL
              AND t.change_xid >= pg_snapshot_xmin($2::pg_snapshot) AND NOT pg_visible_in_snapshot(t.change_xid, $2::pg_snapshot)
            UNION ALL
            SELECT t.task_id, ${TASK_STATE_COLUMNS} FROM graph_nodes n JOIN tasks t ON t.task_id = n.task_id
            WHERE n.task_graph_id = $1 AND NOT n.member AND t.task_group_id <> $1 AND t.change_xid IS NOT NULL
              AND t.change_xid >= pg_snapshot_xmin($2::pg_snapshot) AND NOT pg_visible_in_snapshot(t.change_xid, $2::pg_snapshot)
         ) c) AS changes
  FROM task_graphs g WHERE g.task_graph_id = $1`;

/** Without `since`: the graph and the current cursor only. */
const CURRENT_SQL = `SELECT g.*, pg_current_snapshot()::text AS cursor, false AS graph_changed, '[]'::json AS changes
  FROM task_graphs g WHERE g.task_graph_id = $1`;

type ChangesRow = GraphRow & { cursor: string; graph_changed: boolean; changes: TaskStateRow[] };

const changesOutput: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: [...Object.keys(graphHeaderSchema), 'graphChanged', 'changes'],
  properties: {
    ...graphHeaderSchema,
    graphChanged: { type: 'boolean', description: 'the graph row (state, blockedBy, nodeCount) changed since `since`' },
    changes: {
      type: 'object',
      additionalProperties: false,
      required: Object.keys(stateArraysSchema),
      properties: stateArraysSchema,
    },
  },
};

export const taskGraphChangesEndpoint = declare({
  service: 'scheduler',
  name: 'taskGraphChanges',
  title: 'Task-Graph Changes (long-poll)',
  description: [
    'The tasks of the graph whose state changed after `since` (a cursor from this endpoint or the nodes endpoint),',
    'with the graph\'s status, counts and blocking tasks, and the next cursor. Without `since` it answers at once',
    'with the current cursor. When nothing changed it waits up to `wait` seconds (default 20) for a change, looking',
    `every ${CHANGES_POLL_MS} ms. Cursors are Postgres snapshots: exact across transactions that commit out of`,
    'order and across API processes. Nodes added by extend show as a larger nodeCount: read them with the nodes',
    'endpoint from the old nodeCount.',
  ].join(' '),
  method: 'get',
  route: '/task-graph/<taskGraphId>/changes',
  params: { taskGraphId: SLUGID },
  query: { since: /^[0-9]{1,20}:[0-9]{1,20}:[0-9,]{0,40000}$/, wait: /^[0-9]{1,2}$/ },
  output: changesOutput,
  async handler({ params, query, deps, request }) {
    let closed = false;
    request.raw.once('close', () => (closed = true));
    const since = query.since;
    const waitMs = Math.min(Number(query.wait ?? DEFAULT_WAIT_S), 60) * 1000;
    const deadline = Date.now() + waitMs;
    for (;;) {
      let row: ChangesRow | undefined;
      try {
        ({ rows: [row] } = since
          ? await deps.pool.query<ChangesRow>(CHANGES_SQL, [params.taskGraphId, since])
          : await deps.pool.query<ChangesRow>(CURRENT_SQL, [params.taskGraphId]));
      } catch (err) {
        if ((err as { code?: string }).code === '22P02') {
          throw new TgsError('InputError', `Invalid since=${since}: pass a cursor from the nodes or changes endpoint unchanged`);
        }
        throw err;
      }
      if (!row) throw new TgsError('ResourceNotFound', `task-graph ${params.taskGraphId} not found`);
      const header = graphHeader(row);
      // An API that is shutting down (its server no longer listening) answers at once, so it never waits on us.
      const stopping = closed || !request.server.server.listening;
      if (!since || row.changes.length > 0 || row.graph_changed || Date.now() >= deadline || stopping) {
        return { ...header, graphChanged: row.graph_changed, changes: encodeStates(row.changes, header.timeBase) };
      }
      await new Promise((resolve) => setTimeout(resolve, CHANGES_POLL_MS));
    }
  },
});
