import type pg from 'pg';
import { WorkflowExecutionAlreadyStartedError } from '@temporalio/client';
import type { Config } from '../config.js';
import { deploymentIdOf } from '../db/deployment.js';
import type { LazyTemporalClient } from '../temporal/connection.js';
import { DEPLOYMENT_MEMO, SEARCH_ATTRIBUTES, WORKFLOW_TYPE, workflowIdFor, type TaskGraphInput } from '../workflows/contract.js';
import { TgsError } from '../errors.js';
import { graphPageLink } from './workflowLink.js';

/**
 * Starts the graph's workflow; a workflow that exists already (running or closed) is left alone, so
 * a repeated PUT of the same graph never runs it twice. The workflow's memo carries this deployment's id (read from
 * `pool`'s database), so a worker of another deployment on the same task queue can tell it is not its own, and the
 * graph page's URL (src/scheduler/workflowLink.ts), so the Temporal Web UI links back to it.
 */
export async function startGraphWorkflow(
  temporal: LazyTemporalClient,
  config: Config,
  pool: Pick<pg.Pool, 'query'>,
  graph: { taskGraphId: string; routing: string; taskCount: number; name?: string },
  input: TaskGraphInput = { taskGraphId: graph.taskGraphId },
  /** `ALLOW_DUPLICATE`: after its workflow completed (an amended finished graph, src/scheduler/amendWorkflow.ts) */
  reuse: 'REJECT_DUPLICATE' | 'ALLOW_DUPLICATE' = 'REJECT_DUPLICATE',
): Promise<void> {
  const deploymentId = await deploymentIdOf(pool);
  let client;
  try {
    client = await temporal.get();
  } catch (err) {
    throw new TgsError(
      'ServiceUnavailable',
      `task-graph ${graph.taskGraphId} is stored but its workflow could not start: Temporal at ${config.temporalAddress} is unreachable (${(err as Error).message}). Retry the same request once Temporal is up.`,
    );
  }
  const link = graphPageLink(config, graph.taskGraphId);
  try {
    await client.workflow.start(WORKFLOW_TYPE, {
      taskQueue: config.temporalTaskQueue,
      workflowId: workflowIdFor(graph.taskGraphId),
      args: [input],
      workflowIdReusePolicy: reuse,
      memo: { [DEPLOYMENT_MEMO]: deploymentId, ...link.memo },
      typedSearchAttributes: [
        { key: SEARCH_ATTRIBUTES.state, value: 'running' },
        { key: SEARCH_ATTRIBUTES.schedulerId, value: config.schedulerId },
      ],
      staticSummary: `task-graph ${graph.name ? `“${graph.name}” ` : ''}· ${graph.taskCount} tasks · routing ${graph.routing || '_'}`,
      staticDetails: link.staticDetails,
    });
  } catch (err) {
    if (err instanceof WorkflowExecutionAlreadyStartedError) return;
    throw new TgsError(
      'ServiceUnavailable',
      `task-graph ${graph.taskGraphId} is stored but its workflow could not start (${(err as Error).message}). Retry the same request.`,
    );
  }
}
