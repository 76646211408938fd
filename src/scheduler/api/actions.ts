import { loadTasks } from '../../queue/taskRow.js';
import { rerunCandidate, rerunRefusal } from '../../queue/rerunTasks.js';
import { WorkflowNotFoundError, WorkflowUpdateFailedError } from '@temporalio/client';
import { TASK_BODY_LIMIT } from '../../api/bodyLimits.js';
import { declare } from '../../api/endpoint.js';
import { TgsError } from '../../errors.js';
import { cancelSignal, rerunUpdate, workflowIdFor } from '../../workflows/contract.js';
import { extendSchema } from '../graphSchema.js';
import { extendTaskGraph } from '../extendTaskGraph.js';
import { getGraph, requireGraph } from '../graphStore.js';
import { findMemberTaskId } from '../graphReads.js';
import { signalGraphExtended } from '../graphGroup.js';
import { resumeGraph } from '../resumeGraph.js';
import type { ApiDeps } from '../../api/deps.js';
import { graphStatus, graphTasksReply, statusResponseSchema, taskGraphResponseSchema } from './shapes.js';

async function graphHandle(deps: ApiDeps, taskGraphId: string) {
  const row = await requireGraph(deps.pool, taskGraphId);
  let client;
  try {
    client = await deps.temporal.get();
  } catch (err) {
    throw new TgsError('ServiceUnavailable', `Temporal is unreachable (${(err as Error).message}); retry shortly`);
  }
  return { row, handle: client.workflow.getHandle(workflowIdFor(taskGraphId)) };
}

function closedGraph(taskGraphId: string, state: string) {
  return new TgsError('RequestConflict', `task-graph ${taskGraphId} is ${state}: its workflow has ended, so it accepts no more changes`);
}

export const extendEndpoint = declare({
  service: 'scheduler',
  name: 'extendTaskGraph',
  title: 'Extend Task-Graph',
  description: 'Add tasks to a running or blocked task-graph; new tasks may require existing labels. A finished or canceled graph → 409.',
  method: 'post',
  route: '/task-graph/<taskGraphId>/extend',
  scopes: 'scheduler:extend-task-graph:<taskGraphId>',
  input: extendSchema,
  output: taskGraphResponseSchema,
  bodyLimit: (config) => config.maxGraphBytes,
  streamJson: { expand: ['tasks'], maxMemberBytes: TASK_BODY_LIMIT },
  concurrency: 'graphSubmits',
  async handler({ params, body, deps, authorizeExpression }) {
    const result = await extendTaskGraph(deps, params.taskGraphId, body, authorizeExpression);
    await signalGraphExtended(deps, params.taskGraphId, result.graph.node_count);
    return graphTasksReply(result.graph, result.tasks);
  },
});

export const rerunEndpoint = declare({
  service: 'scheduler',
  name: 'rerunTask',
  title: 'Rerun Task',
  description: [
    `Rerun a resolved task of the graph (by taskId or label) through the workflow Update \`${rerunUpdate.name}\`, so the answer`,
    'says at once whether it was accepted. `resetDependents: true` also reruns the dependents that already resolved,',
    'after this task completes again.',
  ].join(' '),
  method: 'post',
  route: '/task-graph/<taskGraphId>/rerun/<taskIdOrLabel>',
  scopes: 'scheduler:rerun-task:<taskGraphId>/<taskIdOrLabel>',
  input: {
    type: 'object',
    additionalProperties: false,
    properties: { resetDependents: { type: 'boolean', default: false } },
  },
  async handler({ params, body, deps }) {
    const { row, handle } = await graphHandle(deps, params.taskGraphId);
    const taskId = await findMemberTaskId(deps.pool, params.taskGraphId, params.taskIdOrLabel);
    if (!taskId) throw new TgsError('ResourceNotFound', `no task ${params.taskIdOrLabel} in task-graph ${params.taskGraphId}`);
    // What the queue would refuse (deadline, 50 runs) is refused here at once rather than after the Update.
    const [task] = await loadTasks(deps.pool, [taskId]);
    const refusal = task && rerunRefusal(rerunCandidate(task), new Date());
    if (refusal) throw new TgsError('RequestConflict', `rerun refused: ${refusal}`);
    try {
      const result = await handle.executeUpdate(rerunUpdate, {
        args: [{ taskId: taskId, resetDependents: (body as { resetDependents: boolean }).resetDependents }],
      });
      return { ...result, accepted: true };
    } catch (err) {
      if (err instanceof WorkflowUpdateFailedError) {
        throw new TgsError('RequestConflict', `rerun refused: ${err.cause?.message ?? err.message}`);
      }
      if (err instanceof WorkflowNotFoundError || /already completed|not found/i.test((err as Error).message)) {
        throw closedGraph(params.taskGraphId, row.state);
      }
      throw err;
    }
  },
});

export const cancelEndpoint = declare({
  service: 'scheduler',
  name: 'cancelTaskGraph',
  title: 'Cancel Task-Graph',
  description: 'Cancel every unresolved task of the graph; the graph state becomes canceled.',
  method: 'post',
  route: '/task-graph/<taskGraphId>/cancel',
  scopes: 'scheduler:cancel-task-graph:<taskGraphId>',
  output: statusResponseSchema,
  async handler({ params, deps, auth }) {
    const { row, handle } = await graphHandle(deps, params.taskGraphId);
    if (row.state === 'finished' || row.state === 'canceled') return { status: graphStatus(row) };
    try {
      await handle.signal(cancelSignal, { reason: `canceled by ${auth.clientId ?? 'an anonymous caller'} through the scheduler API` });
    } catch (err) {
      if (err instanceof WorkflowNotFoundError) throw closedGraph(params.taskGraphId, row.state);
      throw err;
    }
    // The workflow records the state with its canceled message; wait briefly so the answer shows it.
    for (let i = 0; i < 50; i++) {
      const now = await getGraph(deps.pool, params.taskGraphId);
      if (now && now.state === 'canceled') return { status: graphStatus(now) };
      await new Promise((r) => setTimeout(r, 100));
    }
    return { status: { ...graphStatus(row), state: 'canceled' as const } };
  },
});

export const resumeEndpoint = declare({
  service: 'scheduler',
  name: 'resumeTaskGraph',
  title: 'Resume Task-Graph (tgs extension)',
  description: [
    'Start the workflow of a `terminated` graph again (its workflow was terminated, timed out or failed before the graph',
    'ended; or a running or blocked graph whose workflow is closed), from what the queue and the graph\'s tables hold:',
    'completed tasks do not run again, live ones are awaited, failed ones with reruns left are rerun. The graph is',
    '`running` again. 409 while its workflow runs, and for a finished or canceled graph.',
  ].join(' '),
  method: 'post',
  route: '/task-graph/<taskGraphId>/resume',
  scopes: 'scheduler:resume-task-graph:<taskGraphId>',
  output: statusResponseSchema,
  async handler({ params, deps, auth }) {
    const row = await resumeGraph(deps, params.taskGraphId, auth.clientId ?? 'an anonymous caller');
    return { status: graphStatus(row) };
  },
});
