import type pg from 'pg';
import type { Config } from '../config.js';
import { withTransaction } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { validateInput } from '../api/validate.js';
import type { ScopeExpression } from '../auth/scopes.js';
import { createTasks } from '../queue/createTasks.js';
import { createTaskScopes } from '../queue/createTaskScopes.js';
import { extendSchema, type GraphNodeInput } from './graphSchema.js';
import { describeGraphErrors, prepareGraphNodes } from './prepareGraph.js';
import { appendMemberNodes, getGraph, memberIndex, type GraphRow } from './graphStore.js';
import { refuseOverNodeLimit } from './nodeLimit.js';

/**
 * Operation G2, extend (docs/formats.md § Graph operations): adds tasks to a running (or blocked) graph; they may require existing labels.
 * Under the graph row lock, so it cannot race the workflow declaring the graph finished.
 */
export async function extendTaskGraph(
  deps: { config: Config; pool: pg.Pool },
  taskGraphId: string,
  body: unknown,
  authorize: (expr: ScopeExpression) => void,
): Promise<{ graph: GraphRow; tasks: { label: string; taskId: string }[] }> {
  const { tasks } = validateInput<{ tasks: Record<string, GraphNodeInput> }>(extendSchema, body);
  return withTransaction(deps.pool, async (client) => {
    const graph = await getGraph(client, taskGraphId, true);
    if (!graph) throw new TgsError('ResourceNotFound', `task-graph ${taskGraphId} not found`);
    if (graph.state === 'finished' || graph.state === 'canceled') {
      throw new TgsError('RequestConflict', `task-graph ${taskGraphId} is ${graph.state}; only a running or blocked graph can be extended`);
    }
    refuseOverNodeLimit(deps.config, taskGraphId, graph.node_count, Object.keys(tasks).length);
    const existing = await memberIndex(client, taskGraphId);
    const { nodes, errors } = prepareGraphNodes({
      config: deps.config,
      taskGraphId,
      graphRouting: graph.routing,
      tasks,
      existing,
      now: new Date(),
    });
    if (errors.size > 0) throw new TgsError('InputValidationError', describeGraphErrors(errors), { labels: [...errors.keys()].sort() });
    authorize({ AllOf: [`scheduler:extend-task-graph:${taskGraphId}`, ...nodes.map((n) => createTaskScopes(n.definition))] });
    const nodeCount = await appendMemberNodes(client, taskGraphId, graph.node_count, nodes, existing);
    await createTasks(client, deps.config, nodes.map((n) => ({ taskId: n.taskId, definition: n.definition })), { scheduleIndependent: false });
    return {
      graph: { ...graph, node_count: nodeCount, task_count: graph.task_count + nodes.length },
      tasks: nodes.map((n) => ({ label: n.label, taskId: n.taskId })),
    };
  });
}
