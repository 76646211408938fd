import type { Client } from '@temporalio/client';
import type { Config } from '../config.js';
import { resolutionsSignal, tasksDefinedSignal, WORKFLOW_TYPE, workflowIdFor, type Resolution, type TaskGraphInput } from '../workflows/contract.js';

/**
 * Signals to graph workflows (the relay's graph-signal lane and the bridge send them). A graph that exists because of queue-level dependencies (origin
 * `queue`) has its workflow started by the signal if it is not running; a graph submitted whole (origin `graph`)
 * only hears it (a missing workflow throws WorkflowNotFoundError: its graph has ended).
 */
export async function signalResolutions(client: Client, config: Pick<Config, 'temporalTaskQueue'>, taskGraphId: string, origin: string, resolutions: Resolution[]): Promise<void> {
  const workflowId = workflowIdFor(taskGraphId);
  if (origin === 'queue') {
    await client.workflow.signalWithStart(WORKFLOW_TYPE, {
      workflowId,
      taskQueue: config.temporalTaskQueue,
      args: [{ taskGraphId, origin: 'queue' } satisfies TaskGraphInput],
      signal: resolutionsSignal,
      signalArgs: [resolutions],
    });
  } else {
    await client.workflow.getHandle(workflowId).signal(resolutionsSignal, resolutions);
  }
}

/** Tasks created with queue-level dependencies join their group's workflow (started if need be). */
export async function signalTasksDefined(client: Client, config: Pick<Config, 'temporalTaskQueue'>, taskGroupId: string, taskIds: string[]): Promise<void> {
  await client.workflow.signalWithStart(WORKFLOW_TYPE, {
    workflowId: workflowIdFor(taskGroupId),
    taskQueue: config.temporalTaskQueue,
    args: [{ taskGraphId: taskGroupId, origin: 'queue' } satisfies TaskGraphInput],
    signal: tasksDefinedSignal,
    signalArgs: [{ taskIds }],
  });
}
