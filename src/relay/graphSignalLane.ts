import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import type pg from 'pg';
import type { Config } from '../config.js';
import { FlushSpacing } from '../graphSignals/flushSpacing.js';
import { signalResolutions } from '../graphSignals/graphSignals.js';
import type { ResolutionSignal } from '../graphSignals/flushPlan.js';
import type { SignalOutcome } from '../graphSignals/signalBackoff.js';
import { OutageLog } from '../outageLog.js';
import { observeGraphSignalLag } from '../observability/metrics.js';
import { deleteSignalled, LEFT_BATCH, readLeftSignals, type GraphSignalRow } from './graphSignalStore.js';
import { PendingSignals } from './pendingSignals.js';

/** The most graphs one flush signals at once: the signals in flight are bounded by it (flushes go one at a time). */
export const LANE_MAX_GRAPHS = 64;

/**
 * The least time (ms) between the starts of two flushes under light load (src/graphSignals/flushSpacing.ts). The
 * bridge's 25 ms is longer than a chain's hop once the lane takes the bridge's 5-7 ms out of it (15-17 ms), and a
 * chain's next resolution would wait out the rest; 10 ms lets it go at once and still gathers a few resolutions of a
 * busy graph into one signal. Under load (a flush of 8 or more) the bridge's 100 ms applies as it is.
 */
export const LANE_MIN_INTERVAL_MS = 10;

/** The lane's counters, in the relay's stats. */
export interface GraphSignalLaneStats {
  /** signals Temporal accepted (or whose workflow had ended) */
  signals: number;
  /** resolutions those signals carried */
  resolutionsSignalled: number;
  /** signals Temporal refused (that graph's rows are sent again after its backoff) */
  failedSignals: number;
  /** rows recorded and not yet accepted, as this relay holds them */
  signalsWaiting: number;
}

export interface GraphSignalLaneOptions {
  config: Pick<Config, 'temporalTaskQueue'>;
  pool: pg.Pool;
  temporal: () => Promise<Client>;
  stats: GraphSignalLaneStats;
  log: (line: string, fields?: { taskGraphId?: string }) => void;
}

/**
 * The relay's signal loop: sends each graph the resolutions the relay's reads recorded for it (src/relay/
 * graphSignalStore.ts) as one `resolutions` signal, beside the AMQP publish and never awaited by it, and deletes
 * the rows Temporal accepted (or whose workflow has ended: a graph of origin `graph` that is not running hears
 * nothing any more). Flushes go one at a time, spaced as the bridge's are (src/graphSignals/flushSpacing.ts), each
 * signalling at most LANE_MAX_GRAPHS graphs; a graph whose signal fails waits out a backoff of its own while the
 * others go on (src/relay/pendingSignals.ts). When the relay becomes the active one it loads what is left in the
 * table (a relay that died, or lost its lock, before its rows were accepted), and when it stops being active it
 * forgets its rows: the next active relay loads them. A resolution is signalled at least once; the workflow drops
 * a runId it has heard already (src/workflows/graphModel.ts applyResolution), so a second signal changes nothing.
 */
export class GraphSignalLane {
  private readonly pending = new PendingSignals();
  private readonly spacing = new FlushSpacing({ minIntervalMs: LANE_MIN_INTERVAL_MS });
  private readonly outage: OutageLog;
  private timer: (() => void) | undefined;
  private flushing: Promise<void> | undefined;
  private active = false;
  private stopped = false;
  /** the table may hold rows this relay does not: load them before the next flush */
  private loadLeft = false;
  /** the last load was cut at LEFT_BATCH: load again once this relay's rows are all accepted */
  private moreLeft = false;

  constructor(private readonly options: GraphSignalLaneOptions) {
    this.outage = new OutageLog(options.log, 'graph signals: Postgres/Temporal');
  }

  /** Rows a read recorded: signalled at once (or after the flush spacing, under load). */
  heard(rows: GraphSignalRow[]): void {
    if (!this.active || rows.length === 0) return;
    this.pending.add(rows);
    this.options.stats.signalsWaiting = this.pending.size;
    this.spacing.arrived(Date.now());
    this.schedule();
  }

  /** The relay became the active one: what the table holds is signalled too. */
  activate(): void {
    this.active = true;
    this.loadLeft = true;
    this.schedule();
  }

  /** The relay is no longer the active one: its rows are the next active relay's. */
  deactivate(): void {
    this.active = false;
    this.timer?.();
    this.timer = undefined;
    this.pending.clear();
    this.options.stats.signalsWaiting = 0;
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.deactivate();
    await this.flushing;
  }

  /** Arms the next flush: at once, after the spacing, or when the first backing-off graph may go again. */
  private schedule(): void {
    if (this.flushing || this.stopped || !this.active) return;
    if (this.moreLeft && this.pending.size === 0) this.loadLeft = true;
    const now = Date.now();
    const next = this.loadLeft ? now : this.pending.nextAt(now);
    if (next === undefined) return;
    const delay = Math.max(next - now, this.loadLeft ? 0 : this.spacing.delay(now));
    this.timer?.();
    if (delay > 0) {
      const t = setTimeout(() => this.start(), delay);
      this.timer = () => clearTimeout(t);
    } else {
      // after this turn's I/O callbacks, as the bridge's flush: the rows of one read are all in by then
      const t = setImmediate(() => this.start());
      this.timer = () => clearImmediate(t);
    }
  }

  private start(): void {
    this.timer = undefined;
    if (this.flushing || this.stopped || !this.active) return;
    this.flushing = this.flush()
      .catch((err: unknown) => this.options.log(`graph signals: flush failed unexpectedly (${(err as Error).message})`))
      .finally(() => {
        this.flushing = undefined;
        this.schedule();
      });
  }

  private async flush(): Promise<void> {
    const { pool, stats, log } = this.options;
    if (this.loadLeft) {
      try {
        const left = await readLeftSignals(pool);
        if (!this.active) return;
        this.pending.add(left);
        this.loadLeft = false;
        this.moreLeft = left.length >= LEFT_BATCH;
        this.outage.recovered();
      } catch (err) {
        this.outage.failed(err, 'the rows left by an earlier relay are read again');
        await new Promise((resolve) => setTimeout(resolve, this.pending.backoff.flushFailed()));
        return;
      }
    }
    const now = Date.now();
    const signals = this.pending.take(now, LANE_MAX_GRAPHS);
    if (signals.length === 0) return;
    this.spacing.started(now, signals.reduce((n, s) => n + s.msgs.length, 0));
    let client: Client;
    try {
      client = await this.options.temporal();
    } catch (err) {
      this.outage.failed(err, `${signals.length} graph(s)' signals sent again with backoff`);
      this.pending.release(signals, Date.now(), this.pending.backoff.flushFailed());
      return;
    }
    this.pending.backoff.flushSucceeded();
    const outcomes = await Promise.all(signals.map((s) => this.send(client, s)));
    if (!this.active) return;
    const settled = this.pending.settle(signals, outcomes, Date.now());
    stats.failedSignals += settled.failedSignals;
    stats.signalsWaiting = this.pending.size;
    for (const { key, failures } of settled.recovered) log(`graph signals: task-graph/${key} accepts signals again after ${failures} failure(s)`, { taskGraphId: key });
    for (const { key, error } of settled.startedFailing) {
      log(`graph signals: signal to task-graph/${key} failed (${(error as Error).message}); its resolutions are sent again with backoff, other graphs go on`, { taskGraphId: key });
    }
    try {
      await deleteSignalled(pool, settled.accepted);
      this.outage.recovered();
    } catch (err) {
      // the rows stay in the table: read again and signalled again (the workflow drops what it heard)
      this.outage.failed(err, 'accepted graph signals stay recorded and are sent again');
      this.loadLeft = true;
    }
  }

  /** One graph's signal: its outcome (a workflow that has ended counts as accepted: nothing waits on it). */
  private async send(client: Client, s: ResolutionSignal<GraphSignalRow>): Promise<SignalOutcome<GraphSignalRow>> {
    try {
      await signalResolutions(client, this.options.config, s.key, s.origin, s.resolutions);
      this.options.stats.signals++;
      this.options.stats.resolutionsSignalled += s.resolutions.length;
      for (const row of s.msgs) observeGraphSignalLag(row.recorded_at);
      return { key: s.key, msgs: s.msgs };
    } catch (err) {
      return err instanceof WorkflowNotFoundError ? { key: s.key, msgs: s.msgs } : { key: s.key, msgs: s.msgs, error: err };
    }
  }
}
