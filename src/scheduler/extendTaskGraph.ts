import type pg from 'pg';
import type { Config } from '../config.js';
import { withTransaction } from '../db/pool.js';
import { TgsError } from '../errors.js';
import type { ScopeExpression } from '../auth/scopes.js';
import { GraphIntake, readGraphBody, type LabelledTask } from './graphIntake.js';
import { graphTaskIds } from './graphTaskIds.js';
import { bodyMembers, type GraphBody } from './bodyMembers.js';
import { getGraph, memberIndex, setNodeCounts, type GraphRow } from './graphStore.js';

/**
 * Operation G2, extend (docs/formats.md § Graph operations): adds tasks to a running (or blocked) graph; they may
 * require existing labels. Under the graph row lock, so it cannot race the workflow declaring the graph finished;
 * the body is read, validated and written in chunks inside that transaction, as createTaskGraph does.
 */
export async function extendTaskGraph(
  deps: { config: Config; pool: pg.Pool },
  taskGraphId: string,
  body: GraphBody,
  authorize: (expr: ScopeExpression) => void,
): Promise<{ graph: GraphRow; tasks: Iterable<LabelledTask[]> }> {
  authorize(`scheduler:extend-task-graph:${taskGraphId}`);
  const members = bodyMembers(body);
  return withTransaction(deps.pool, async (client) => {
    const graph = await getGraph(client, taskGraphId, true);
    if (!graph) throw new TgsError('ResourceNotFound', `task-graph ${taskGraphId} not found`);
    if (graph.state === 'finished' || graph.state === 'canceled') {
      throw new TgsError('RequestConflict', `task-graph ${taskGraphId} is ${graph.state}; only a running or blocked graph can be extended`);
    }
    const intake = new GraphIntake({
      config: deps.config,
      taskGraphId,
      routing: graph.routing,
      existing: await memberIndex(client, taskGraphId),
      startIdx: graph.node_count,
      now: new Date(),
      authorize,
    });
    const onlyTasks = (envelope: Record<string, unknown>) => {
      const unknown = Object.keys(envelope)[0];
      if (unknown !== undefined) throw new TgsError('InputValidationError', `Input does not match the schema:\nbody has unknown property ${JSON.stringify(unknown.slice(0, 100))}`);
    };
    const { tasksSeen } = await readGraphBody(members, intake, graphTaskIds(), () => intake.flush(client), onlyTasks);
    if (!tasksSeen) throw new TgsError('InputValidationError', "Input does not match the schema:\nbody must have required property 'tasks'");
    // the graph's declared scopes bound what its tasks may use, as at create
    intake.finish(graph.scopes);
    // an extend has no envelope: its cached nodes keep their own modes
    await intake.finishCache(client, 'use');
    await intake.flush(client);
    const nodeCount = graph.node_count + intake.count;
    await setNodeCounts(client, taskGraphId, nodeCount, intake.count);
    return { graph: { ...graph, node_count: nodeCount, task_count: graph.task_count + intake.count }, tasks: intake.created() };
  });
}
