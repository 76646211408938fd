import type { Client, WorkflowHandle } from '@temporalio/client';
import slugid from 'slugid';
import { DEFAULT_TASK_QUEUE, DEPLOYMENT_MEMO, WORKFLOW_TYPE, workflowIdFor, type TaskGraphInput, type TaskGraphWorkflow } from '../workflows/contract.js';

/**
 * Temporal refuses a workflow input over 2 MB ("Blob data size exceeds limit") and warns from 512 KB.
 * Checking first turns that into an error that says what to do instead.
 */
export const TEMPORAL_PAYLOAD_LIMIT_BYTES = 2 * 1024 * 1024;

export class GraphTooLargeForTemporalError extends Error {
  constructor(readonly bytes: number, taskGraphId: string) {
    super(
      `task-graph ${taskGraphId} is ${(bytes / 1024 / 1024).toFixed(1)} MB as a workflow input, over Temporal's 2 MB payload limit. ` +
        `Submit it over HTTP instead (PUT /api/scheduler/v1/task-graph/${taskGraphId}, or \`tgs graph submit FILE\`): ` +
        'the API keeps task definitions in Postgres and starts the same workflow with a tiny input.',
    );
    this.name = 'GraphTooLargeForTemporalError';
  }
}

export interface StartTaskGraphOptions {
  /** Defaults to a new slugid. */
  taskGraphId?: string;
  /** Defaults to `tgs-scheduler` (the worker's TGS_TASK_QUEUE). */
  taskQueue?: string;
  /**
   * The id of the deployment whose workers should run it (its `tgs_deployment` row, src/db/deployment.ts), kept in the
   * workflow's memo: a worker of another deployment sharing the task queue then never fails it for good. Without it,
   * whichever deployment's worker takes the first task creates the graph in its own database.
   */
  deploymentId?: string;
}

/**
 * Starts a graph the Temporal-native way: the `taskGraph` workflow with the graph (docs/formats.md § Task-graph format) as its
 * only argument. The workflow creates the tasks itself, exactly as `PUT /task-graph/<id>` would.
 */
export async function startTaskGraph(
  client: Client,
  graph: Omit<TaskGraphInput, 'carried' | 'origin' | 'taskGraphId'>,
  options: StartTaskGraphOptions = {},
): Promise<{ taskGraphId: string; handle: WorkflowHandle<TaskGraphWorkflow> }> {
  const taskGraphId = options.taskGraphId ?? slugid.nice();
  const bytes = Buffer.byteLength(JSON.stringify(graph));
  if (bytes > TEMPORAL_PAYLOAD_LIMIT_BYTES) throw new GraphTooLargeForTemporalError(bytes, taskGraphId);
  const handle = await client.workflow.start<TaskGraphWorkflow>(WORKFLOW_TYPE, {
    taskQueue: options.taskQueue ?? DEFAULT_TASK_QUEUE,
    workflowId: workflowIdFor(taskGraphId),
    args: [graph],
    ...(options.deploymentId ? { memo: { [DEPLOYMENT_MEMO]: options.deploymentId } } : {}),
  });
  return { taskGraphId, handle };
}
