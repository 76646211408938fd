import type { FireEnv } from './fire.js';
import { TgsError } from '../errors.js';
import { requireScopes } from '../auth/requireScopes.js';
import { createTaskGraph } from '../scheduler/createTaskGraph.js';
import { getGraph } from '../scheduler/graphStore.js';
import { startGraphWorkflow } from '../scheduler/startWorkflow.js';

/**
 * Fires a hook whose template renders a task-graph (docs/formats.md § Hooks, tgs's extension): the graph is created
 * as createTaskGraph creates it, acting as the role `hook-id:<hookGroupId>/<hookId>` with its expanded `scopes` (so the
 * role needs `scheduler:create-task-graph` and createTask's scopes for every task), under the fire's taskId as its
 * taskGraphId, and its workflow started. A scheduled fire or a message's (`derivedId`) retried after the graph was
 * stored (its fire not yet recorded) finds the graph under the id only that fire makes, and counts it as created.
 */
export async function fireGraph(
  env: FireEnv,
  graph: Record<string, unknown>,
  as: { role: string; scopes: string[] },
  taskGraphId: string,
  derivedId: boolean,
): Promise<void> {
  let created;
  try {
    created = await createTaskGraph(env, taskGraphId, graph, { authorize: (expr) => requireScopes(as.role, as.scopes, expr) });
  } catch (err) {
    if (derivedId && err instanceof TgsError && err.code === 'RequestConflict' && (await getGraph(env.pool, taskGraphId))) return;
    throw err;
  }
  try {
    await startGraphWorkflow(env.temporal, env.config, {
      taskGraphId,
      routing: created.graph.routing,
      taskCount: created.graph.task_count,
      name: created.graph.metadata.name,
    });
  } catch (err) {
    // The graph is stored: the API's `missing workflows` sweep starts its workflow once Temporal answers
    // (src/scheduler/missingWorkflows.ts), so the fire stands.
    if (!(err instanceof TgsError && err.code === 'ServiceUnavailable')) throw err;
  }
}
