import type pg from 'pg';
import type { AuthContext } from '../auth/authenticate.js';
import { scopeSatisfied, type ScopeExpression } from '../auth/scopes.js';
import { prepared } from '../db/pool.js';
import { TgsError } from '../errors.js';
import type { ApiDeps } from '../api/deps.js';
import { extendedSignal, workflowIdFor } from '../workflows/contract.js';
import { getGraph } from './graphStore.js';

/**
 * A task group that is a task-graph (stored by createTaskGraph, over HTTP or Temporal) belongs to its submitter:
 * a plain createTask into it needs what extending it needs, `scheduler:extend-task-graph:<taskGraphId>`, and a
 * finished or canceled graph takes no new task (it would be reopened behind its owner's back). Runs in the
 * createTask transaction before anything is written, holding the graph row lock as extendTaskGraph does, so the
 * workflow cannot declare the graph finished in between. Returns the graph the task joins, if any, with its node count before.
 * Groups of queue-level dependencies (origin 'queue') keep Taskcluster's rules: anyone with createTask's scopes.
 */
export async function authorizeTaskInGraphGroup(
  client: pg.PoolClient,
  taskGroupId: string,
  taskId: string,
  taskScopes: readonly string[],
  ctx: { auth: AuthContext; satisfies(expr: ScopeExpression): boolean; authorizeExpression(expr: ScopeExpression): void },
): Promise<{ taskGraphId: string; nodeCount: number } | undefined> {
  const { rows } = await client.query<{ origin: string }>(prepared('SELECT origin FROM task_graphs WHERE task_graph_id = $1', [taskGroupId]));
  if (rows[0]?.origin !== 'graph') return undefined;
  const graph = await getGraph(client, taskGroupId, true);
  if (!graph) return undefined;
  const scope = `scheduler:extend-task-graph:${taskGroupId}`;
  if (!ctx.satisfies(scope)) {
    const who = ctx.auth.clientId === undefined ? 'This request' : `Client ${ctx.auth.clientId}`;
    throw new TgsError(
      ctx.auth.clientId === undefined ? 'AuthenticationFailed' : 'InsufficientScopes',
      `${who} lacks scopes: ${scope} (task group ${taskGroupId} is a task-graph: adding a task to it with createTask needs the scope to extend that graph)`,
      { required: scope },
    );
  }
  ctx.authorizeExpression(scope);
  // a graph that declares its scopes holds only tasks those cover, however the task joins it (create, extend, here)
  const undeclared = graph.scopes.length > 0 ? taskScopes.filter((s) => !scopeSatisfied(graph.scopes, s)) : [];
  if (undeclared.length > 0) {
    throw new TgsError('InputValidationError', `task ${taskId} uses scopes task-graph ${taskGroupId} does not declare: ${undeclared.join(', ')}`);
  }
  if (graph.state === 'finished' || graph.state === 'canceled') {
    const { rowCount } = await client.query('SELECT 1 FROM tasks WHERE task_id = $1', [taskId]);
    // Repeating the createTask of a task the graph already has writes nothing: it answers as before.
    if (rowCount === 0) {
      throw new TgsError(
        'RequestConflict',
        `task-graph ${taskGroupId} is ${graph.state}: its task group takes no new tasks (a finished graph is not reopened; start a new graph)`,
      );
    }
  }
  return { taskGraphId: taskGroupId, nodeCount: graph.node_count };
}

/**
 * Tells the graph's workflow it has nodes up to nodeCount. Best effort: the nodes are stored, and the workflow
 * also finds them when it reconciles with Postgres or before it declares the graph finished.
 */
export async function signalGraphExtended(deps: Pick<ApiDeps, 'temporal'>, taskGraphId: string, nodeCount: number): Promise<void> {
  try {
    const client = await deps.temporal.get();
    await client.workflow.getHandle(workflowIdFor(taskGraphId)).signal(extendedSignal, { nodeCount });
  } catch (err) {
    console.error(`task-graph ${taskGraphId}: extended signal failed, the workflow will pick the tasks up when it reconciles:`, (err as Error).message);
  }
}
