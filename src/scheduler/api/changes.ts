import { declare, type JsonSchema } from '../../api/endpoint.js';
import { readChanges } from '../graphReads.js';
import { encodeStates, graphHeader, graphHeaderSchema, stateArraysSchema } from './nodes.js';
import { GET_TASK_GRAPH } from './shapes.js';

/** How often a waiting request looks again: a change reaches the page well within a second. */
export const CHANGES_POLL_MS = 200;
const DEFAULT_WAIT_S = 20;

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
  scopes: GET_TASK_GRAPH,
  query: { since: /^[0-9]{1,20}:[0-9]{1,20}:[0-9,]{0,40000}$/, wait: /^[0-9]{1,2}$/ },
  output: changesOutput,
  concurrency: 'graphChanges',
  async handler({ params, query, deps, request }) {
    let closed = false;
    request.raw.once('close', () => (closed = true));
    const since = query.since;
    const waitMs = Math.min(Number(query.wait ?? DEFAULT_WAIT_S), 60) * 1000;
    const deadline = Date.now() + waitMs;
    for (;;) {
      const row = await readChanges(deps.pool, params.taskGraphId, since);
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
