import type { ApiDeps } from '../api/deps.js';
import { reconcileSignal, workflowIdFor } from '../workflows/contract.js';

/**
 * Asks a graph's workflow to reconcile with the queue now: an explanation found a task its model should have
 * scheduled (a lost message). Best effort: the workflow also reconciles after 60 s without news. Answers whether the
 * signal was accepted.
 */
export async function reconcileNow(deps: Pick<ApiDeps, 'temporal'>, taskGraphId: string): Promise<boolean> {
  try {
    const client = await deps.temporal.get();
    await client.workflow.getHandle(workflowIdFor(taskGraphId)).signal(reconcileSignal);
    return true;
  } catch {
    return false;
  }
}
