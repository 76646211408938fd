import * as wf from '@temporalio/workflow';
import type { defineSearchAttributeKey } from '@temporalio/common';
import type { Activities } from './activityContract.js';
import type { HookFireInput, HookFireResult } from './hookFireContract.js';

/** What `defineSearchAttributeKey('TemporalScheduledStartTime', 'DATETIME')` returns, written out (types only from common). */
const SCHEDULED_START_TIME = { name: 'TemporalScheduledStartTime', type: 'DATETIME' } as const satisfies ReturnType<typeof defineSearchAttributeKey<'DATETIME'>>;

// One short activity (render, one transaction); retried until Postgres answers, since the fire is idempotent.
const activities = wf.proxyActivities<Activities>({
  startToCloseTimeout: '1 minute',
  retry: { initialInterval: '1s', maximumInterval: '30s' },
});

/**
 * One scheduled fire of a hook, started by the hook's Temporal Schedule. The time it was scheduled for (the
 * search attribute Temporal sets on every schedule action, backfills included) is the fire's `now` and names its
 * task, so however often the activity runs, one task is created and one fire recorded.
 */
export async function hookFire(input: HookFireInput): Promise<HookFireResult> {
  const scheduledAt = wf.workflowInfo().typedSearchAttributes.get(SCHEDULED_START_TIME);
  if (!scheduledAt) {
    throw wf.ApplicationFailure.nonRetryable('hookFire runs as a hook schedule\'s action only: this run has no TemporalScheduledStartTime');
  }
  return activities.fireScheduledHook({ hookGroupId: input.hookGroupId, hookId: input.hookId, scheduledAt: scheduledAt.toISOString() });
}
