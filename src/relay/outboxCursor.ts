/**
 * Where the relay reads the outbox from: a cursor (the highest id it is done with) plus the gaps below it,
 * the ids it passed without seeing a row. Pure logic; the statements are in relay.ts.
 *
 * Why: every published row is deleted, so the front of the outbox's primary-key index is dead entries, and
 * reading "the first 500 rows by id" walked them on every batch (4.3 ms a read under the benchmark's load).
 * A read from the cursor starts where the last one stopped. A plain cursor would lose rows, though: an id is
 * taken by nextval() when the row is inserted, and its transaction may commit after a higher id's did, so a
 * read can see id 8 while 7 is still invisible. The ids passed that way are kept as gaps and read again until
 * their row shows up or their transaction has certainly ended.
 *
 * A read (`nextRead`) asks for the rows with an id in (cursor, cursor + batch] and those in any gap, the
 * lowest `batch` of them by id, together with the snapshot it read them in (xmin; see nextXid below) and the
 * highest id the sequence had handed out when it ran (lastTaken). The first read of an active period is a
 * full read instead: the first `batch` rows by id, wherever they are. After the batch is published:
 * - rows read inside a gap leave it (a gap is a range of ids and may split);
 * - the cursor moves to the highest id read, or, when the read was not cut by its LIMIT (every visible row
 *   it asked for came back), to the end of its window: cursor + batch, at most lastTaken (a full read: to
 *   lastTaken). Every id passed without a row becomes a gap. The window bounds the rows a read touches
 *   whatever plan Postgres picks: with `id > $cursor` alone, a stale row estimate (a churned outbox
 *   analyzed while nearly empty, then a burst) made it read all 100,000 rows above the cursor with a bitmap
 *   scan and sort them, 270 ms a read; ids above the window wait for the next read, taken at once.
 *
 * When a gap may be dropped. Let T be the transaction that inserted (or will insert) a row with id g of a gap.
 * 1. g was handed out before the read R1 that created the gap ended: the gap lies below a row R1 saw, or
 *    at or below lastTaken as R1 read it, and the sequence has CACHE 1 (relay.ts checks), so ids are
 *    handed out in increasing order as time goes on.
 * 2. T has a transaction id (xid) from at most microseconds after nextval(g): the INSERT that calls
 *    nextval() for a row stores that row next, and storing it assigns T's xid if T had none (nextval
 *    itself assigns one when it logs the sequence). A row g that is never stored can never be read.
 *    GAP_ARM_MS (1 s) is that window with a margin of five orders of magnitude; only a backend stopped
 *    for a second between the two steps (SIGSTOP, swapped out) would break it.
 * 3. So on the first read R2 that starts at least GAP_ARM_MS after R1 ended, T's xid is below nextXid(R2),
 *    the next xid Postgres would assign, read during R2 after its snapshot was taken. Not the snapshot's
 *    xmax: xmax is one past the latest *completed* xid, and a running transaction whose xid is at or above
 *    it is not listed in the snapshot at all (a transaction that took its xid before T took its own and
 *    then committed T's neighbour leaves exactly that; the unit test replays it).
 * 4. A read R3 (R2 itself or later) whose snapshot xmin is at least that horizon sees T ended: xmin is the
 *    lowest xid still running when the snapshot was taken (xmax if none below xmax is), and
 *    xid(T) < horizon <= xmin <= xmax. If T committed,
 *    row g is visible to R3; R3 asked for the whole gap, so it read g unless its LIMIT cut the answer
 *    below g. The gap is dropped only when R3 was not cut there, and only after R3's batch is published
 *    (a failed batch resets everything, below). Every row of the gap was therefore read, or never existed.
 *
 * Per-task order. A later message of a task is written by a transaction that waited for the earlier one's row
 * lock, so its id b is taken after the earlier message's transaction committed: when a read sees b, the
 * earlier message's row a < b is visible to it too. Either a was read before, or the read asks for it — a full
 * read asks for everything; a cursor read for a above the cursor (inside b's window: a < b <= cursor + batch)
 * and for a below it in a gap, which is not dropped while a can still appear (above) — and a read returns the
 * lowest ids first, so a comes back in the same batch as b, ahead of it, or was published earlier.
 *
 * Bounds. More than maxGaps gaps (a transaction left open for hours holds xmin back while rollbacks keep
 * leaving gaps) → start over with a full read (the caller logs it). Each gap costs the read an index probe:
 * 1,000 empty gaps took 5.8 ms of a read, 10,000 took 57 ms, so at 1,000 the gaps cost about what the read
 * they replace did. After a failed batch (its rows stay in the outbox and must be read again) and whenever
 * the relay becomes active, the caller resets: the next read is a full read again.
 */

/** How long after a gap was first seen a read's nextXid counts as covering its transaction (point 2 above). */
export const GAP_ARM_MS = 1000;
/** More gaps than this → start over with a full read (see Bounds above). */
export const MAX_GAPS = 1000;

/** A range of ids the cursor passed without reading a row (inclusive). */
export interface IdRange {
  lo: number;
  hi: number;
}

interface Gap extends IdRange {
  /** When the read that found it had ended (a monotonic clock, ms). */
  seenAt: number;
  /** nextXid of the first read that started GAP_ARM_MS after seenAt: every xid that took one of its ids is below. */
  horizon: bigint | undefined;
}

/** The next read: the whole outbox from the start, or the cursor's window and the gaps. */
export type OutboxReadPlan = { full: true } | { full: false; after: number; upTo: number; gapLo: number[]; gapHi: number[] };

/** What a read returned and the state of the database it saw. */
export interface OutboxRead {
  /** The ids of the rows read, ascending. */
  ids: number[];
  /** The highest id the outbox sequence had handed out, read during the statement (0: none yet). */
  lastTaken: number;
  /** The snapshot's xmin: the lowest xid still running when it was taken. */
  xmin: bigint;
  /** The next xid Postgres would assign, read during the statement, after its snapshot was taken. */
  nextXid: bigint;
  /** When the statement was sent and when its answer arrived (a monotonic clock, ms). */
  startedAt: number;
  endedAt: number;
}

export class OutboxCursor {
  private cursor = 0;
  private full = true;
  private gaps: Gap[] = [];
  private readonly batch: number;
  private readonly armMs: number;
  private readonly maxGaps: number;

  constructor(options: { batch: number; armMs?: number; maxGaps?: number }) {
    this.batch = options.batch;
    this.armMs = options.armMs ?? GAP_ARM_MS;
    this.maxGaps = options.maxGaps ?? MAX_GAPS;
  }

  /** Forget everything: the next read is a full read. */
  reset(): void {
    this.cursor = 0;
    this.full = true;
    this.gaps = [];
  }

  /** The number of gaps (ranges of ids) being watched. */
  get gapCount(): number {
    return this.gaps.length;
  }

  /** The gaps being watched, lowest first. */
  gapRanges(): IdRange[] {
    return this.gaps.map(({ lo, hi }) => ({ lo, hi }));
  }

  nextRead(): OutboxReadPlan {
    if (this.full) return { full: true };
    return { full: false, after: this.cursor, upTo: this.cursor + this.batch, gapLo: this.gaps.map((g) => g.lo), gapHi: this.gaps.map((g) => g.hi) };
  }

  /**
   * Takes in a read whose rows were all published. `overflow`: more than maxGaps gaps, so the cursor was reset;
   * `more`: rows may be waiting beyond what this read asked for (read again without waiting).
   */
  advance(read: OutboxRead): { overflow: boolean; more: boolean } {
    const { ids } = read;
    for (let i = 1; i < ids.length; i++) if (ids[i] <= ids[i - 1]) throw new Error('outbox read: ids must be ascending and distinct');
    const cut = ids.length >= this.batch;
    const lastRead = ids.length > 0 ? ids[ids.length - 1] : 0;

    const kept: Gap[] = [];
    for (const gap of this.removeRead(ids)) {
      if (gap.horizon === undefined && read.startedAt >= gap.seenAt + this.armMs) gap.horizon = read.nextXid;
      const ended = gap.horizon !== undefined && read.xmin >= gap.horizon;
      const covered = !cut || gap.hi <= lastRead;
      if (!(ended && covered)) kept.push(gap);
    }

    const from = this.cursor;
    const windowEnd = this.full ? read.lastTaken : Math.min(from + this.batch, read.lastTaken);
    const to = Math.max(from, lastRead, cut ? 0 : windowEnd);
    // Every id in (from, to] not read is a gap; the ids read above `from` are ascending.
    let next = from + 1;
    for (const id of ids) {
      if (id <= from) continue;
      if (id > next) kept.push({ lo: next, hi: id - 1, seenAt: read.endedAt, horizon: undefined });
      next = id + 1;
    }
    if (to >= next) kept.push({ lo: next, hi: to, seenAt: read.endedAt, horizon: undefined });

    this.cursor = to;
    this.full = false;
    this.gaps = kept;
    const more = cut || to < read.lastTaken;
    if (kept.length > this.maxGaps) {
      this.reset();
      return { overflow: true, more: true };
    }
    return { overflow: false, more };
  }

  /** The gaps without the ids just read (both lists ascending), split where a read id fell inside one. */
  private removeRead(ids: number[]): Gap[] {
    const out: Gap[] = [];
    let i = 0;
    for (const gap of this.gaps) {
      while (i < ids.length && ids[i] < gap.lo) i++;
      let lo = gap.lo;
      while (i < ids.length && ids[i] <= gap.hi) {
        if (ids[i] > lo) out.push({ ...gap, lo, hi: ids[i] - 1 });
        lo = ids[i] + 1;
        i++;
      }
      if (lo <= gap.hi) out.push({ ...gap, lo });
    }
    return out;
  }
}
