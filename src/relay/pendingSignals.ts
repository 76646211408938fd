import { recordedSignals, type ResolutionSignal } from '../graphSignals/flushPlan.js';
import { SignalBackoff, type Settlement, type SignalOutcome } from '../graphSignals/signalBackoff.js';
import type { GraphSignalRow } from './graphSignalStore.js';

/**
 * The graph-signal lane's rows not yet accepted by their graph, without I/O: which graphs a flush signals (those
 * not signalled already and not backing off, at most `maxGraphs` of them: the signals in flight are bounded), and
 * what an answer does (accepted rows leave and are deleted; a failing graph's rows wait out its backoff,
 * src/graphSignals/signalBackoff.ts, while the other graphs go on). A row is kept once per graph and message,
 * however often it is heard (a read of rows recorded before, a relay's leftovers loaded beside a read).
 */
export class PendingSignals {
  private readonly rows = new Map<string, Map<string, GraphSignalRow>>();
  private readonly inFlight = new Set<string>();
  private readonly notBefore = new Map<string, number>();
  readonly backoff = new SignalBackoff();

  /** Takes in rows; returns how many were new. */
  add(rows: GraphSignalRow[]): number {
    let added = 0;
    for (const row of rows) {
      let graph = this.rows.get(row.task_graph_id);
      if (!graph) this.rows.set(row.task_graph_id, (graph = new Map()));
      if (graph.has(row.message_id)) continue;
      graph.set(row.message_id, row);
      added++;
    }
    return added;
  }

  /** Rows kept (waiting, in flight or backing off). */
  get size(): number {
    let n = 0;
    for (const graph of this.rows.values()) n += graph.size;
    return n;
  }

  /** When (ms, the caller's clock) a graph's rows may be signalled next: `now` if some may be now, undefined if none wait. */
  nextAt(now: number): number | undefined {
    let next: number | undefined;
    for (const key of this.rows.keys()) {
      if (this.inFlight.has(key)) continue;
      const at = Math.max(now, this.notBefore.get(key) ?? now);
      if (next === undefined || at < next) next = at;
    }
    return next;
  }

  /** The signals of a flush at `now`: one a graph, at most `maxGraphs`, their graphs marked in flight. */
  take(now: number, maxGraphs: number): ResolutionSignal<GraphSignalRow>[] {
    const rows: GraphSignalRow[] = [];
    let graphs = 0;
    for (const [key, graph] of this.rows) {
      if (graphs >= maxGraphs) break;
      if (this.inFlight.has(key) || (this.notBefore.get(key) ?? now) > now) continue;
      this.inFlight.add(key);
      graphs++;
      rows.push(...graph.values());
    }
    return recordedSignals(rows);
  }

  /** A flush failed before any signal went (the Temporal connection): its graphs wait `delayMs` from `now`. */
  release(signals: ResolutionSignal<GraphSignalRow>[], now: number, delayMs: number): void {
    for (const s of signals) {
      this.inFlight.delete(s.key);
      this.notBefore.set(s.key, now + delayMs);
    }
  }

  /**
   * The answers to a flush's signals at `now`: the settlement (src/graphSignals/signalBackoff.ts), whose `accepted`
   * rows are no longer kept (the caller deletes them) and whose retried rows' graphs wait out their backoff.
   */
  settle(signals: ResolutionSignal<GraphSignalRow>[], outcomes: SignalOutcome<GraphSignalRow>[], now: number): Settlement<GraphSignalRow> {
    const settlement = this.backoff.settle(signals.flatMap((s) => s.msgs), outcomes);
    for (const s of signals) this.inFlight.delete(s.key);
    for (const row of settlement.accepted) {
      const graph = this.rows.get(row.task_graph_id);
      graph?.delete(row.message_id);
      if (graph?.size === 0) {
        this.rows.delete(row.task_graph_id);
        this.notBefore.delete(row.task_graph_id);
      }
    }
    for (const [delay, rows] of settlement.retries) for (const row of rows) this.notBefore.set(row.task_graph_id, now + delay);
    return settlement;
  }

  /** Forgets every row (the relay is no longer the active one: the next active relay loads them from the table). */
  clear(): void {
    this.rows.clear();
    this.inFlight.clear();
    this.notBefore.clear();
  }
}
