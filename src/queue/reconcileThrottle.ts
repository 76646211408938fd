/**
 * At most one `reconcile` signal a graph per RECONCILE_SIGNAL_EVERY_MS from an API process's explanations. An
 * anonymous `GET …/explain` of an inconsistent task asks the graph's workflow to reconcile; the workflow coalesces
 * the signals, but each is an event of its history, so a caller polling explain added one a call (security review
 * 2026-11-28, info 15). Ten seconds is the inconsistency window itself (TGS_INCONSISTENT_AFTER_MS): a reconciliation
 * asked for has that long to act before the task looks inconsistent again. At most MAX_GRAPHS graphs are
 * remembered (the oldest go as they expire); a graph beyond that gets no signal until one expires, which costs it at
 * most the workflow's own 60 s reconciliation.
 */
export const RECONCILE_SIGNAL_EVERY_MS = 10_000;
const MAX_GRAPHS = 10_000;

export class ReconcileThrottle {
  /** graph → when it was last signalled, oldest first (a graph signalled again moves to the end) */
  private readonly last = new Map<string, number>();

  constructor(private readonly everyMs = RECONCILE_SIGNAL_EVERY_MS, private readonly maxGraphs = MAX_GRAPHS) {}

  /** Whether to signal this graph now; if so, counted as signalled. */
  take(taskGraphId: string, now = Date.now()): boolean {
    const at = this.last.get(taskGraphId);
    if (at !== undefined && now - at < this.everyMs) return false;
    for (const [id, t] of this.last) {
      if (now - t < this.everyMs) break;
      this.last.delete(id);
    }
    if (this.last.size >= this.maxGraphs) return false;
    this.last.delete(taskGraphId);
    this.last.set(taskGraphId, now);
    return true;
  }
}
