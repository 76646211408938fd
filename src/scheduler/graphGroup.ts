import type pg from 'pg';
import { scopeSatisfied } from '../auth/scopes.js';
import { prepared } from '../db/pool.js';
import { TgsError } from '../errors.js';
import type { LazyTemporalClient } from '../temporal/connection.js';
import type { TaskCaller, TaskGroupOwner } from '../queue/taskGroupOwner.js';
import { extendedSignal, workflowIdFor } from '../workflows/contract.js';
import { getGraph, joinQueueTasks } from './graphStore.js';
import { reconcileNow } from './reconcileNow.js';

/**
 * The scheduler as the owner of its graphs' task groups (the queue's port, src/queue/taskGroupOwner.ts): a task
 * created into a graph's group is admitted by authorizeTaskInGraphGroup, joins the graph as a node in the same
 * transaction, and the workflow is told after the commit; an explanation's reconcile signals the graph's workflow.
 */
export function graphTaskGroups(temporal: LazyTemporalClient): TaskGroupOwner {
  return {
    async admit(client, task, caller) {
      const graph = await authorizeTaskInGraphGroup(client, task.taskGroupId, task.taskId, task.scopes, caller);
      if (!graph) return undefined;
      let grownTo: number | undefined;
      return {
        async joined(tx, taskIds) {
          // A task of a graph's group is a node of that graph at once, so the graph cannot finish without it.
          const nodeCount = await joinQueueTasks(tx, graph.taskGraphId, taskIds);
          if (nodeCount > graph.nodeCount) grownTo = nodeCount;
        },
        async committed() {
          if (grownTo !== undefined) await signalGraphExtended({ temporal }, graph.taskGraphId, grownTo);
        },
      };
    },
    reconcile: (taskGroupId) => reconcileNow({ temporal }, taskGroupId),
  };
}

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
  ctx: TaskCaller,
): Promise<{ taskGraphId: string; nodeCount: number } | undefined> {
  const { rows } = await client.query<{ origin: string }>(prepared('SELECT origin FROM task_graphs WHERE task_graph_id = $1', [taskGroupId]));
  if (rows[0]?.origin !== 'graph') return undefined;
  const graph = await getGraph(client, taskGroupId, true);
  if (!graph) return undefined;
  const scope = `scheduler:extend-task-graph:${taskGroupId}`;
  if (!ctx.satisfies(scope)) {
    const who = ctx.auth.clientId === undefined ? 'This request' : `Client ${ctx.auth.clientId}`;
    throw new TgsError(
      'InsufficientScopes',
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
export async function signalGraphExtended(deps: { temporal: LazyTemporalClient }, taskGraphId: string, nodeCount: number): Promise<void> {
  try {
    const client = await deps.temporal.get();
    await client.workflow.getHandle(workflowIdFor(taskGraphId)).signal(extendedSignal, { nodeCount });
  } catch (err) {
    console.error(`task-graph ${taskGraphId}: extended signal failed, the workflow will pick the tasks up when it reconciles:`, (err as Error).message);
  }
}
