/** A signal's outcome: the graph (or group) it went to, the messages it carried, and its error if it failed. */
export interface SignalOutcome<M> {
  key: string;
  msgs: M[];
  error?: unknown;
}

/** What to do with a flush's messages once its signals are answered. */
export interface Settlement<M> {
  /** every graph they concern accepted its signal (or has ended): ack */
  accepted: M[];
  /** requeue these after this many ms: the longest backoff among the failing graphs each concerns */
  retries: Map<number, M[]>;
  /** graphs whose signal failed now after succeeding before: worth one line each */
  startedFailing: { key: string; error: unknown }[];
  /** graphs that accept signals again, with how many failures they had */
  recovered: { key: string; failures: number }[];
  failedSignals: number;
}

/** A failing graph's messages come back after 250 ms, doubling to 30 s: a graph failing for good costs one attempt every 30 s. */
export const GRAPH_BACKOFF = { firstMs: 250, maxMs: 30_000 };
/** A flush that failed as a whole (Postgres or the Temporal connection): everything comes back after 500 ms (2 × 250), doubling to 10 s. */
export const FLUSH_BACKOFF = { firstMs: 250, maxMs: 10_000 };

/**
 * The failure bookkeeping of the bridge and the relay's graph-signal lane, without I/O: consecutive failures per graph (so one graph that refuses signals
 * cannot hold up the others: only its messages are requeued, with a backoff of its own) and of whole flushes.
 */
export class SignalBackoff {
  private flushFailures = 0;
  private readonly graphFailures = new Map<string, number>();

  /** A whole flush failed before any signal: how long (ms) until its messages are requeued. */
  flushFailed(): number {
    this.flushFailures++;
    return Math.min(FLUSH_BACKOFF.firstMs * 2 ** this.flushFailures, FLUSH_BACKOFF.maxMs);
  }

  flushSucceeded(): void {
    this.flushFailures = 0;
  }

  /** Consecutive failed signals of this graph. */
  failuresOf(key: string): number {
    return this.graphFailures.get(key) ?? 0;
  }

  /** Counts each outcome and decides, for every message of the flush, ack or requeue after how long. */
  settle<M>(items: M[], outcomes: SignalOutcome<M>[]): Settlement<M> {
    const result: Settlement<M> = { accepted: [], retries: new Map(), startedFailing: [], recovered: [], failedSignals: 0 };
    // A message goes back if any graph it concerns failed, after the longest backoff among them.
    const retryAfter = new Map<M, number>();
    for (const outcome of outcomes) {
      const failures = this.failuresOf(outcome.key);
      if (!('error' in outcome)) {
        if (failures > 0) result.recovered.push({ key: outcome.key, failures });
        this.graphFailures.delete(outcome.key);
        continue;
      }
      this.graphFailures.set(outcome.key, failures + 1);
      result.failedSignals++;
      if (failures === 0) result.startedFailing.push({ key: outcome.key, error: outcome.error });
      const delay = Math.min(GRAPH_BACKOFF.firstMs * 2 ** failures, GRAPH_BACKOFF.maxMs);
      for (const m of outcome.msgs) retryAfter.set(m, Math.max(retryAfter.get(m) ?? 0, delay));
    }
    result.accepted = items.filter((m) => !retryAfter.has(m));
    for (const [m, delay] of retryAfter) result.retries.set(delay, [...(result.retries.get(delay) ?? []), m]);
    return result;
  }
}
