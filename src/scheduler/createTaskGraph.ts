import { createHash } from 'node:crypto';
import type pg from 'pg';
import type { Config } from '../config.js';
import { withTransaction } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { validateInput } from '../api/validate.js';
import { scopeSatisfied, type ScopeExpression } from '../auth/scopes.js';
import { createTasks } from '../queue/createTasks.js';
import { createTaskScopes } from '../queue/createTaskScopes.js';
import { taskGraphSchema, type TaskGraphInputBody } from './graphSchema.js';
import { describeGraphErrors, prepareGraphNodes } from './prepareGraph.js';
import { appendMemberNodes, getGraph, type GraphRow } from './graphStore.js';
import { refuseOverNodeLimit } from './nodeLimit.js';

export interface CreatedGraph {
  graph: GraphRow;
  tasks: { label: string; taskId: string }[];
}

/**
 * sha256 of the graph's canonical JSON (keys sorted, no whitespace), so the same graph always hashes the same.
 * Fed to the hash in 64 KB pieces instead of built as one string: for a 100,000-task graph that string was
 * 2.6 million rope nodes and ~150 MB of heap at the submit's peak.
 */
export function graphHash(body: unknown): string {
  const hash = createHash('sha256');
  let pending = '';
  const push = (text: string) => {
    pending += text;
    if (pending.length >= 65_536) {
      hash.update(pending);
      pending = '';
    }
  };
  const write = (value: unknown): void => {
    if (Array.isArray(value)) {
      push('[');
      value.forEach((item, i) => {
        if (i > 0) push(',');
        // as the joined string form did: an undefined item prints nothing
        if (item !== undefined) write(item);
      });
      push(']');
    } else if (value && typeof value === 'object') {
      push('{');
      Object.keys(value)
        .sort()
        .forEach((key, i) => {
          if (i > 0) push(',');
          push(`${JSON.stringify(key)}:`);
          const v = (value as Record<string, unknown>)[key];
          // a template literal prints undefined as "undefined"
          if (v === undefined) push('undefined');
          else write(v);
        });
      push('}');
    } else {
      push(String(JSON.stringify(value)));
    }
  };
  write(body);
  hash.update(pending);
  return hash.digest('hex');
}

async function existingResult(pool: pg.Pool, row: GraphRow): Promise<CreatedGraph> {
  const { rows } = await pool.query<{ label: string; task_id: string }>(
    'SELECT label, task_id FROM graph_nodes WHERE task_graph_id = $1 AND member ORDER BY idx',
    [row.task_graph_id],
  );
  return { graph: row, tasks: rows.map((r) => ({ label: r.label, taskId: r.task_id })) };
}

/**
 * What createTask demands for each node, each distinct expression once: the tasks of a graph mostly share a
 * worker pool, scheduler and routes, and one expression per task was 150 MB of heap for 100,000 tasks.
 */
function distinctCreateTaskScopes(nodes: { definition: Parameters<typeof createTaskScopes>[0] }[]): ScopeExpression[] {
  const distinct = new Map<string, ScopeExpression>();
  for (const { definition: d } of nodes) {
    const key = JSON.stringify([d.scopes ?? [], d.routes ?? [], d.schedulerId, d.priority ?? '', d.provisionerId, d.workerType]);
    if (!distinct.has(key)) distinct.set(key, createTaskScopes(d));
  }
  return [...distinct.values()];
}

/**
 * Validates a task-graph (docs/formats.md) and stores it with all its tasks in one transaction: the graph row, its
 * nodes and every task (unscheduled: the workflow schedules the roots). Idempotent: the same graph
 * again returns what was stored; a different graph under the same id is a conflict.
 * `authorize` receives the scopes the caller needs before anything is written.
 */
export async function createTaskGraph(
  deps: { config: Config; pool: pg.Pool },
  taskGraphId: string,
  body: unknown,
  options: { authorize?: (expr: ScopeExpression) => void; now?: Date } = {},
): Promise<CreatedGraph & { created: boolean }> {
  const { config, pool } = deps;
  // Before any work on the body: a caller who may not create graphs at all learns it at once.
  options.authorize?.('scheduler:create-task-graph');
  const graph = validateInput<TaskGraphInputBody>(taskGraphSchema, body);
  // Before looking the id up: a caller without the scope learns nothing about which graphs exist.
  options.authorize?.('scheduler:create-task-graph');
  const hash = graphHash(graph);
  const already = await getGraph(pool, taskGraphId);
  if (already) {
    if (already.graph_hash !== hash) {
      throw new TgsError('RequestConflict', `task-graph ${taskGraphId} already exists with a different definition`);
    }
    return { ...(await existingResult(pool, already)), created: false };
  }
  refuseOverNodeLimit(config, taskGraphId, 0, Object.keys(graph.tasks).length);
  const now = options.now ?? new Date();
  const { nodes, errors } = prepareGraphNodes({ config, taskGraphId, graphRouting: graph.routing, tasks: graph.tasks, now });
  if (errors.size > 0) throw new TgsError('InputValidationError', describeGraphErrors(errors), { labels: [...errors.keys()].sort() });
  options.authorize?.({ AllOf: ['scheduler:create-task-graph', ...graph.scopes, ...distinctCreateTaskScopes(nodes)] });
  if (graph.scopes.length > 0) {
    // A graph that declares its scopes may only hold tasks whose scopes those cover (Taskcluster's rule).
    const over = nodes.filter((n) => (n.definition.scopes ?? []).some((s) => !scopeSatisfied(graph.scopes, s)));
    if (over.length > 0) {
      throw new TgsError('InputValidationError', `tasks use scopes the graph does not declare: ${over.map((n) => n.label).join(', ')}`);
    }
  }
  try {
    return await withTransaction(pool, async (client) => {
      const { rows } = await client.query<GraphRow>(
        `INSERT INTO task_graphs (task_graph_id, scheduler_id, routing, graph_hash, scopes, metadata, tags)
         VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING *`,
        [taskGraphId, config.schedulerId, graph.routing, hash, graph.scopes, graph.metadata, graph.tags],
      );
      // A graph owns its task group: it may not take over a group someone's createTask calls made already.
      // After the graph row, so two identical PUTs racing still meet on its primary key (below), not here.
      const group = await client.query('SELECT 1 FROM task_groups WHERE task_group_id = $1', [taskGraphId]);
      if ((group.rowCount ?? 0) > 0) {
        throw new TgsError('RequestConflict', `task group ${taskGraphId} exists already: a task-graph's id must name a new task group`);
      }
      await appendMemberNodes(client, taskGraphId, 0, nodes, new Map());
      await createTasks(client, config, nodes.map((n) => ({ taskId: n.taskId, definition: n.definition })), { scheduleIndependent: false });
      return {
        graph: { ...rows[0], node_count: nodes.length, task_count: nodes.length },
        tasks: nodes.map((n) => ({ label: n.label, taskId: n.taskId })),
        created: true,
      };
    });
  } catch (err) {
    // Two identical PUTs racing: the loser finds the winner's graph.
    if ((err as { code?: string }).code === '23505') {
      const row = await getGraph(pool, taskGraphId);
      if (row && row.graph_hash === hash) return { ...(await existingResult(pool, row)), created: false };
      throw new TgsError('RequestConflict', `task-graph ${taskGraphId} already exists with a different definition`);
    }
    throw err;
  }
}
