/**
 * The public contract of the `hookFire` workflow, the action of every hook's Temporal Schedule
 * (src/hooks/schedules.ts): its name, input and result. Workflow code imports it, so it imports nothing.
 */

export const HOOK_FIRE_WORKFLOW = 'hookFire';

export interface HookFireInput {
  hookGroupId: string;
  hookId: string;
  /**
   * the hook's patterns and policy when the schedule was written: reconciliation compares them with the hook's row
   * (the workflow itself needs only the ids)
   */
  schedule: string[];
  policy?: { overlap: string; catchupWindowSeconds: number };
}

export interface HookFireResult {
  /** `created`: the task exists (made now or by an earlier attempt); `refused`: recorded as an error fire */
  result: 'created' | 'refused' | 'declined' | 'no-hook';
  taskId?: string;
  error?: string;
}
