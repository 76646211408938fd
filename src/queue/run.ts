/**
 * One element of Taskcluster's `runs` array (index = runId), as the queue stores and answers it. Generic in its
 * state and without imports, so the browser bundle shares it: the queue's `Run` narrows `state` to a run state.
 */
export interface RunOf<State extends string> {
  runId: number;
  state: State;
  reasonCreated: 'scheduled' | 'retry' | 'task-retry' | 'rerun' | 'exception';
  reasonResolved?: string;
  workerGroup?: string;
  workerId?: string;
  takenUntil?: string;
  scheduled: string;
  started?: string;
  resolved?: string;
  /** a run resolved from the cache: the run it reuses (docs/formats.md § Cached tasks) */
  cachedFrom?: { taskId: string; runId: number; key: string; tier: string };
  /** a run kept by an amend's early cutoff: the run of the task it replaces (docs/formats.md § Early cutoff) */
  keptFrom?: { taskId: string; runId: number };
}

/** Taskcluster allows at most 50 runs of a task (runIds 0 to 49). */
export const MAX_RUNS = 50;

/** The reasons a worker may give reportException (Taskcluster's list). */
export const EXCEPTION_REASONS = ['worker-shutdown', 'malformed-payload', 'resource-unavailable', 'internal-error', 'intermittent-task'] as const;
