/** The activities as the taskGraph workflow calls them: bulk loading and creation, and the hot path. */
import * as wf from '@temporalio/workflow';
import type { Activities } from './activityContract.js';
import { INVALID_TASK_GRAPH } from './contract.js';

// Loading structure and creating graphs move megabytes: regular activities with generous timeouts. They
// heartbeat (src/activities/heartbeat.ts): one whose worker died is retried after 30 s, not 5 minutes.
export const bulk = wf.proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  heartbeatTimeout: '30 seconds',
  retry: { initialInterval: '500ms', maximumInterval: '30s', nonRetryableErrorTypes: [INVALID_TASK_GRAPH] },
});

// The hot path (schedule, rerun, publish, reconcile) is a few ms of SQL: local activities save a round trip
// through the server (signal → activity's UPDATE done p50 7.5-9 ms vs 10-12 ms for an eager regular activity,
// the bench's floors on a 2-core machine).
export const hot = (summary: string) =>
  wf.proxyLocalActivities<Activities>({
    startToCloseTimeout: '60 seconds',
    retry: { initialInterval: '100ms', maximumInterval: '10s' },
    summary,
  });

// Reading a cancellation's origin from the workflow's history (cancelRequestOf): a courtesy, so a few tries at most.
export const lookup = wf.proxyActivities<Activities>({
  startToCloseTimeout: '20 seconds',
  retry: { initialInterval: '500ms', maximumAttempts: 3 },
});
