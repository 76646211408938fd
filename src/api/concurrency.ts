import type { Config } from '../config.js';
import { TgsError } from '../errors.js';

/**
 * Per-process caps on expensive reads that anyone may make, so a flood of them cannot take the database pool
 * (20 connections) from claims and reports. Beyond the cap the API answers 429 with `Retry-After` at once,
 * before authentication's database lookup or any query.
 * - `graphChanges`: the scheduler's changes long-poll. Each waiting request queries every 200 ms for up to
 *   60 s; the UI keeps one open per viewed graph.
 * - `graphNodes`: the nodes endpoint, one REPEATABLE READ transaction holding a connection while a graph's
 *   nodes (up to a 100,000-task graph: a few MB) are read; and the graph's file (src/scheduler/graphFile.ts), whose
 *   transaction holds its connection while the file's tens of MB are written to the reader.
 * - `graphReads`: the scheduler's other reads whose cost grows with a graph: inspect (a page bounded by edges,
 *   src/scheduler/graphReads.ts), inspectTask (a task's dependents), info and the graph list (counts of every
 *   member task's state). Three unthrottled inspect calls on a 180,000-edge graph stalled all of `tgs dev`
 *   (whose database runs on the API's event loop) for 13.6 s.
 * - `graphSubmits`: createTaskGraph and extendTaskGraph. Each holds a connection (its transaction) while its body
 *   streams in and is written chunk by chunk; a 100,000-task graph takes seconds.
 * - `artifacts`: artifact reads and downloads (anyone may read `public/` artifacts). Uploads are not counted:
 *   only the worker of a running run holds a signed putUrl, and a refused final upload would lose its artifact;
 *   an upload holds one connection (its transaction) while the worker sends.
 */
export type ConcurrencyClass = 'graphChanges' | 'graphNodes' | 'graphReads' | 'graphSubmits' | 'artifacts';

/** Seconds a refused caller is told to wait: long enough for a burst to drain, short for a UI to recover. */
export const RETRY_AFTER_SECONDS = 2;

export class ConcurrencyLimit {
  private active = 0;

  constructor(
    readonly name: ConcurrencyClass,
    readonly max: number,
  ) {}

  /** A release function (idempotent), or a 429 TgsError when `max` requests are in flight. */
  acquire(): () => void {
    if (this.active >= this.max) {
      throw new TgsError(
        'TooManyRequests',
        `Too many concurrent ${this.name} requests on this API process (limit ${this.max}): retry after ${RETRY_AFTER_SECONDS} s`,
        { retryAfterSeconds: RETRY_AFTER_SECONDS },
      );
    }
    this.active += 1;
    let released = false;
    return () => {
      if (released) return;
      released = true;
      this.active -= 1;
    };
  }

  get inFlight(): number {
    return this.active;
  }
}

export function concurrencyLimits(config: Config): Record<ConcurrencyClass, ConcurrencyLimit> {
  return {
    graphChanges: new ConcurrencyLimit('graphChanges', config.maxConcurrentGraphChanges),
    graphNodes: new ConcurrencyLimit('graphNodes', config.maxConcurrentGraphNodes),
    graphReads: new ConcurrencyLimit('graphReads', config.maxConcurrentGraphReads),
    graphSubmits: new ConcurrencyLimit('graphSubmits', config.maxConcurrentGraphSubmits),
    artifacts: new ConcurrencyLimit('artifacts', config.maxConcurrentArtifactRequests),
  };
}
