/** A flush of this many messages or more means the bridge is busy: the next waits `loadedIntervalMs`. */
export const LOADED_FLUSH = 8;

export interface FlushSpacingOptions {
  /** the least wait after a message arrives (ms) */
  flushMs?: number;
  /** under load, the least time between the starts of two flushes (ms) */
  minIntervalMs?: number;
  /** after a flush of LOADED_FLUSH messages or more, the least time until the next starts (ms) */
  loadedIntervalMs?: number;
  /** within the loaded interval, a batch whose last message came this long ago goes at once (ms) */
  quietMs?: number;
}

/**
 * When the next flush (the bridge's, or the relay's graph-signal lane's) may start: right away after a quiet spell, and under load at least minIntervalMs
 * (loadedIntervalMs after a big flush) after the previous one started, so a burst becomes one signal a graph
 * instead of many. Pure: the caller passes the clock.
 */
export class FlushSpacing {
  // No wait of its own after a quiet spell: the relay writes each batch in one socket write, so messages published
  // together arrive in one read and are gathered by the flush's turn anyway (a setImmediate, src/bridge/bridge.ts).
  // A 5 ms wait here was a third of a chain's report → signal time (hop split p50 11-12 → 8 ms, hop p50 30.2-34.1 →
  // 27.5-28.0 ms, alternated); under load the intervals below gather the bursts.
  private readonly flushMs: number;
  // Each signal costs a workflow task: Temporal and the scheduler worker spent 1.3 ms of CPU per task of a
  // 10,000-task graph at ~3 resolutions a signal. 25 ms gathers ~8 at 300 tasks/s, and a chain's hops
  // (one resolution every ~35 ms) never wait for it.
  private readonly minIntervalMs: number;
  // Under load, fewer and larger signals: 50 ms after a flush of 8 or more moved a 10,000-task graph's Temporal +
  // scheduler worker + bridge CPU from 0.59-0.60 to 0.43-0.44 ms a task, 100 ms to 0.35-0.36 (and the 100,000-task
  // graph from 144.5 to 125.3 s), while a chain (one resolution a flush) keeps the 25 ms and its hop latency.
  private readonly loadedIntervalMs: number;
  // The loaded interval gathers a burst; once no message has come for quietMs the burst is over, and its last
  // messages (a graph's last tasks, the ones everything after them waits for) need not sit out the rest of the 100 ms.
  // The 10k graph's end waited 100 and 70 ms for them (its last middle report → signal, its last task's report → signal);
  // with 50 ms its second-last report → finished took 156-264 ms against 272-279. 20 ms took more off that end, but the
  // 100k layered graph's stream has lulls that long: its largest run's history grew from 2,397 to 3,084 events (more,
  // smaller signals), where 50 ms left it at 2,382 against 2,368 (docs/bench-journal/2026-11-28.md § Morning of 2026-11-28).
  private readonly quietMs: number;
  private lastAt = 0;
  private lastSize = 0;
  private lastArrivalAt = 0;

  constructor(options: FlushSpacingOptions = {}) {
    this.flushMs = options.flushMs ?? 0;
    this.minIntervalMs = options.minIntervalMs ?? 25;
    this.loadedIntervalMs = options.loadedIntervalMs ?? 100;
    this.quietMs = options.quietMs ?? 50;
  }

  /** A message came at `now`. */
  arrived(now: number): void {
    this.lastArrivalAt = now;
  }

  /** How long (ms) from `now` until the next flush may start (ask again when it has passed: a message may have come). */
  delay(now: number): number {
    if (this.lastSize < LOADED_FLUSH) return Math.max(this.flushMs, this.lastAt + this.minIntervalMs - now);
    return Math.max(this.flushMs, Math.min(this.lastAt + this.loadedIntervalMs, this.lastArrivalAt + this.quietMs) - now);
  }

  /** A flush of `size` messages started at `now`. */
  started(now: number, size: number): void {
    this.lastAt = now;
    this.lastSize = size;
  }
}
