/**
 * The API's audit lines of claims and resolutions: one line per claimWork call (or stream claim) and one per report
 * statement, naming their runs in arrays, not a line per task. A line a task was two JSON lines a task the claim +
 * complete floor does not write (docs/bench-journal/2026-11-29.md § Early morning of 2026-11-29: audit lines per call).
 */

/** Where the lines go (a pino logger or a request's child of it). */
export interface LineLog {
  info(fields: object, line: string): void;
}

/** A run claimed or resolved, as its line names it. */
export interface AuditedRun {
  taskId: string;
  runId: number;
  taskGroupId: string;
}

/** taskIds, runIds (the same order) and the distinct taskGroupIds of some runs. */
const runFields = (runs: AuditedRun[]) => ({
  taskIds: runs.map((r) => r.taskId),
  runIds: runs.map((r) => r.runId),
  taskGroupIds: [...new Set(runs.map((r) => r.taskGroupId))],
});

/** One `tasks claimed` line for the runs one claim took (none for a claim that took nothing). */
export function logClaimed(log: LineLog, worker: { workerGroup: string; workerId: string }, runs: AuditedRun[]): void {
  if (runs.length === 0) return;
  log.info({ ...runFields(runs), workerGroup: worker.workerGroup, workerId: worker.workerId }, 'tasks claimed');
}

/** A run resolved: its outcome, the exception's reason, and the request that reported it when the line spans several. */
export interface ResolvedRun extends AuditedRun {
  outcome: 'completed' | 'failed' | 'exception';
  reason?: string;
  reqId?: string;
}

/**
 * One `tasks <outcome>` line for the runs resolved together with each outcome (and exception reason): a report
 * statement's, a reportResolutions call's, a stream frame's. `reqIds` when the runs' requests are named.
 */
export function logResolved(log: LineLog, runs: ResolvedRun[]): void {
  const byOutcome = new Map<string, ResolvedRun[]>();
  for (const run of runs) {
    const key = `${run.outcome}:${run.reason ?? ''}`;
    const list = byOutcome.get(key);
    if (list) list.push(run);
    else byOutcome.set(key, [run]);
  }
  for (const group of byOutcome.values()) {
    const { outcome, reason } = group[0];
    const reqIds = group.flatMap((r) => (r.reqId === undefined ? [] : [r.reqId]));
    log.info({ ...runFields(group), state: outcome, ...(reason ? { reason } : {}), ...(reqIds.length > 0 ? { reqIds } : {}) }, `tasks ${outcome}`);
  }
}
