import type pg from 'pg';
import { TgsError } from '../errors.js';
import type { GraphRow } from './graphStore.js';

/**
 * The graph's current file (GET /task-graph/<id>/file, docs/formats.md § The graph's current file): `{taskGraphId,
 * tasks: {label: node}, missing: [labels]}`, each member node as it was submitted or last amended (graph_nodes.source,
 * migration 041), in node order; `missing` names the members stored without one (before migration 041). Edited and
 * sent to the amend endpoint it reruns exactly what was edited.
 *
 * Written as it is read, a page of nodes at a time, in one REPEATABLE READ transaction (an amend committed meanwhile
 * is not half in it): the file of the 100,000-task bench graph is 36.6 MB, never one string or one array of objects; it
 * was read in 2.0-5.8 s, 1.1-1.8 s of it the API's CPU (the driver's parse, the key order, the text; load average
 * 9-10 on 2 cores, 2026-11-29).
 */
/**
 * Nodes a query: ~370 KB of text a page. Pages of 200 and of 5,000 read the 100,000-task file in the same time as 1,000
 * (2.4-4.6 s each, 3 reads of each alternated, load average ~10): the page size only bounds what is held at once.
 */
const PAGE = 1000;

/** A node's fields in the order of docs/formats.md, so the file reads like one written by hand. */
const NODE_KEYS = ['requires', 'reruns', 'cache', 'task'];
/** A task's fields in the order of Taskcluster's task definition (docs/formats.md § Task definition). */
const TASK_KEYS = [
  'taskQueueId', 'provisionerId', 'workerType', 'schedulerId', 'taskGroupId', 'routing', 'created', 'deadline', 'expires', 'priority',
  'retries', 'scopes', 'routes', 'tags', 'requires', 'payload', 'metadata', 'extra',
];

/**
 * A JSON value with its objects' keys in an order for people to read: Postgres keeps a jsonb object's keys shortest
 * first (`task` before `requires`, `tags` before `payload`), so the keys named in `order` come first, in its order,
 * then every other key alphabetically; `inner` gives the order of the object under each key (alphabetical below).
 */
function readableOrder(value: unknown, order: readonly string[] = [], inner: (key: string) => readonly string[] = () => []): unknown {
  if (Array.isArray(value)) return value.map((v) => readableOrder(v));
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  const rank = (key: string) => {
    const at = order.indexOf(key);
    return at < 0 ? order.length : at;
  };
  const keys = Object.keys(record).sort((a, b) => rank(a) - rank(b) || (a < b ? -1 : a > b ? 1 : 0));
  // entries, not assignments: a payload may have a "__proto__" key
  return Object.fromEntries(keys.map((k) => [k, readableOrder(record[k], inner(k))]));
}

/** One stored node as the file gives it. */
export const readableNode = (node: unknown) => readableOrder(node, NODE_KEYS, (key) => (key === 'task' ? TASK_KEYS : []));

/**
 * Opens the file of a graph: 404 for an unknown graph and 409 for a task group with queue-level dependencies (it has
 * no graph file) before anything is sent, then the file's text, a page at a time. The transaction's connection is
 * released when the text ends or its reader stops early.
 */
export async function openGraphFile(pool: pg.Pool, taskGraphId: string): Promise<AsyncGenerator<string>> {
  const client = await pool.connect();
  try {
    await client.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    const { rows } = await client.query<Pick<GraphRow, 'origin'>>('SELECT origin FROM task_graphs WHERE task_graph_id = $1', [taskGraphId]);
    if (!rows[0]) throw new TgsError('ResourceNotFound', `task-graph ${taskGraphId} not found`);
    if (rows[0].origin === 'queue') {
      throw new TgsError('RequestConflict', `task-graph ${taskGraphId} is a task group with queue-level dependencies: it has no graph file`);
    }
  } catch (err) {
    await client.query('ROLLBACK').catch(() => undefined);
    client.release();
    throw err;
  }
  return fileText(client, taskGraphId);
}

async function* fileText(client: pg.PoolClient, taskGraphId: string): AsyncGenerator<string> {
  try {
    yield `{"taskGraphId":${JSON.stringify(taskGraphId)},"tasks":{`;
    const missing: string[] = [];
    let after = -1;
    let first = true;
    for (;;) {
      const { rows } = await client.query<{ idx: number; label: string; source: unknown }>(
        `SELECT idx, coalesce(label, task_id) AS label, source FROM graph_nodes
          WHERE task_graph_id = $1 AND member AND idx > $2 ORDER BY idx LIMIT ${PAGE}`,
        [taskGraphId, after],
      );
      if (rows.length === 0) break;
      after = rows[rows.length - 1].idx;
      const parts: string[] = [];
      for (const r of rows) {
        if (r.source === null) missing.push(r.label);
        else parts.push(`${JSON.stringify(r.label)}:${JSON.stringify(readableNode(r.source))}`);
      }
      if (parts.length > 0) {
        yield `${first ? '' : ','}${parts.join(',')}`;
        first = false;
      }
    }
    yield `},"missing":${JSON.stringify(missing)}}`;
  } finally {
    // read only: ROLLBACK ends it whether the text was all read, its reader stopped early or a query failed; a
    // connection that cannot even do that is not reused
    const ended = await client.query('ROLLBACK').then(() => undefined, (err: Error) => err);
    client.release(ended);
  }
}
