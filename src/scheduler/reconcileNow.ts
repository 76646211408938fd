import type { LazyTemporalClient } from '../temporal/connection.js';
import { reconcileSignal, workflowIdFor } from '../workflows/contract.js';
import { withinTime } from '../withinTime.js';

/**
 * Asks a graph's workflow to reconcile with the queue now: an explanation found a task its model should have
 * scheduled (a lost message). Best effort, within 3 s: the workflow also reconciles after 60 s without news. Answers
 * whether the signal was accepted.
 */
export async function reconcileNow(deps: { temporal: LazyTemporalClient }, taskGraphId: string): Promise<boolean> {
  try {
    const signaled = deps.temporal.get().then((client) => client.workflow.getHandle(workflowIdFor(taskGraphId)).signal(reconcileSignal));
    await withinTime(signaled, 3000);
    return true;
  } catch {
    return false;
  }
}
