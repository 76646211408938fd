import { WorkflowExecutionAlreadyStartedError, type Client } from '@temporalio/client';
import type { Config } from '../config.js';

// The claim a deployment holds on its Temporal namespace + task queue (docs/temporal.md § Several deployments on one
// namespace): a workflow `tgs-deployment/<taskQueue>` started on a task queue no worker polls, so it never runs and
// never ends by itself; its memo names the deployment (its id, from its database) and its schedulerId. The scheduler
// worker starts it if absent and refuses to start when it names another deployment.

/** The task queue of the claims: nobody polls it, so a claim's workflow stays running without a worker. */
export const DEPLOYMENT_CLAIM_TASK_QUEUE = 'tgs-deployment-claims';
export const DEPLOYMENT_CLAIM_WORKFLOW_TYPE = 'tgsDeployment';
export const deploymentClaimId = (taskQueue: string) => `tgs-deployment/${taskQueue}`;

export interface DeploymentClaim {
  deploymentId: string;
  schedulerId?: string;
}

/** Another deployment's claim holds this namespace + task queue: its message is the one line to show, with the fix. */
export class DeploymentConflictError extends Error {
  constructor(
    message: string,
    readonly other: DeploymentClaim,
  ) {
    super(message);
    this.name = 'DeploymentConflictError';
  }
}

/** The refusal's text: what is shared, with whom, the settings that separate deployments, and how to release a stale claim. */
export function claimConflictMessage(config: Pick<Config, 'temporalNamespace' | 'temporalTaskQueue' | 'schedulerId'>, mine: string, other: DeploymentClaim): string {
  const id = deploymentClaimId(config.temporalTaskQueue);
  return (
    `refusing to start: Temporal namespace ${config.temporalNamespace}, task queue ${config.temporalTaskQueue} belongs to another tgs deployment ` +
    `(deployment ${other.deploymentId}${other.schedulerId ? `, TGS_SCHEDULER_ID ${other.schedulerId}` : ''}); this one is deployment ${mine} (its own database), ` +
    `and two deployments on one task queue fail each other's graphs. Give this deployment its own TGS_TASK_QUEUE (or TEMPORAL_NAMESPACE), ` +
    `and its own TGS_SCHEDULER_ID or TGS_EXCHANGE_PREFIX if it shares RabbitMQ too (docs/deployments.md § Several deployments). ` +
    `If that other deployment no longer exists, release its claim: temporal workflow terminate --namespace ${config.temporalNamespace} --workflow-id ${id}`
  );
}

/**
 * Claims the namespace + task queue for deployment `deploymentId`: starts the claim's workflow if none runs, and
 * resolves when the running one is this deployment's; throws DeploymentConflictError when it is another's.
 */
export async function claimTaskQueue(client: Client, config: Pick<Config, 'temporalNamespace' | 'temporalTaskQueue' | 'schedulerId'>, deploymentId: string): Promise<void> {
  const workflowId = deploymentClaimId(config.temporalTaskQueue);
  const memo: DeploymentClaim = { deploymentId, schedulerId: config.schedulerId };
  try {
    await client.workflow.start(DEPLOYMENT_CLAIM_WORKFLOW_TYPE, {
      taskQueue: DEPLOYMENT_CLAIM_TASK_QUEUE,
      workflowId,
      args: [],
      memo: { ...memo },
      // a terminated claim (its deployment gone) may be taken again
      workflowIdReusePolicy: 'ALLOW_DUPLICATE',
      staticSummary: `the claim of tgs deployment ${deploymentId} (schedulerId ${config.schedulerId}) on task queue ${config.temporalTaskQueue}`,
    });
    return;
  } catch (err) {
    if (!(err instanceof WorkflowExecutionAlreadyStartedError)) throw err;
  }
  const description = await client.workflow.getHandle(workflowId).describe();
  const other = description.memo as Partial<DeploymentClaim> | undefined;
  if (other?.deploymentId === deploymentId) return;
  const claim: DeploymentClaim = { deploymentId: String(other?.deploymentId ?? 'unknown'), ...(other?.schedulerId ? { schedulerId: String(other.schedulerId) } : {}) };
  throw new DeploymentConflictError(claimConflictMessage(config, deploymentId, claim), claim);
}

/** Ends this deployment's claim (a deployment taken down for good, tests leaving a shared server); another's is left alone. */
export async function releaseTaskQueue(client: Client, config: Pick<Config, 'temporalTaskQueue'>, deploymentId: string): Promise<boolean> {
  const handle = client.workflow.getHandle(deploymentClaimId(config.temporalTaskQueue));
  const description = await handle.describe().catch(() => undefined);
  if (description?.status.name !== 'RUNNING' || (description.memo as Partial<DeploymentClaim> | undefined)?.deploymentId !== deploymentId) return false;
  await handle.terminate(`tgs deployment ${deploymentId} released its claim`);
  return true;
}
