import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { OutboxCursor, type OutboxRead } from '../../src/relay/outboxCursor.js';
import { fuzzParameters } from '../helpers/fuzz.js';

/**
 * A model of what the relay's reads see: a sequence with CACHE 1, transactions that take ids, store their rows
 * up to STORE_MS later and get an xid when they store their first one (or earlier, when they wrote something else
 * first), commit or roll back; snapshots built the way Postgres builds them (xmax one past the latest completed
 * xid, xip the running xids below it, xmin the lowest of those); a read returns the lowest `batch` visible rows
 * its plan asks for. STORE_MS stands for the microseconds between nextval() and the row's insert, stretched to
 * just under GAP_ARM_MS, the most the cursor's argument allows.
 */
const STORE_MS = 999;

interface Txn {
  task: number;
  xid: bigint | undefined;
  status: 'running' | 'committed' | 'aborted';
}

class Model {
  now = 0;
  private nextId = 1;
  private nextXid = 100n;
  private latestCompleted = 99n;
  readonly txns: Txn[] = [];
  /** every stored row: its transaction */
  readonly rows = new Map<number, Txn>();
  readonly deleted = new Set<number>();
  /** ids taken and not stored yet: stored at `at` at the latest (or when their transaction ends) */
  private pending: { id: number; txn: Txn; at: number }[] = [];
  /** what the relay published, in order (a failed batch's rows too: they may have reached the broker) */
  readonly emitted: number[] = [];

  constructor(
    readonly cursor: OutboxCursor,
    readonly batch: number,
  ) {}

  running(): Txn[] {
    return this.txns.filter((t) => t.status === 'running');
  }

  /** A transaction on `task`, once no other holds the task's row (it waited for that one to end). */
  begin(task: number, xidFirst: boolean): void {
    if (this.running().some((t) => t.task === task)) return;
    this.txns.push({ task, xid: xidFirst ? this.nextXid++ : undefined, status: 'running' });
  }

  /** nextval() now, the row stored `delay` ms later: the store assigns the xid if the transaction had none. */
  insert(txn: Txn, count: number, delay: number): void {
    for (let i = 0; i < count; i++) this.pending.push({ id: this.nextId++, txn, at: this.now + delay });
    this.store((p) => p.at <= this.now);
  }

  /** Stores the pending rows `due` picks, in the order their ids were taken. */
  store(due: (p: { txn: Txn; at: number }) => boolean): void {
    const stored = this.pending.filter(due);
    this.pending = this.pending.filter((p) => !due(p));
    for (const { id, txn } of stored) {
      txn.xid ??= this.nextXid++;
      this.rows.set(id, txn);
    }
  }

  tick(ms: number): void {
    // Rows due before the new time are stored first, in time order (a read at the new time sees them).
    const until = this.now + ms;
    for (const p of [...this.pending].sort((x, y) => x.at - y.at)) {
      if (p.at > until) break;
      this.now = Math.max(this.now, p.at);
      this.store((q) => q === p);
    }
    this.now = until;
  }

  /** An id taken by nextval() whose row was never stored (the INSERT failed). */
  burn(): void {
    this.nextId++;
  }

  end(txn: Txn, status: 'committed' | 'aborted'): void {
    // Its INSERTs finished before it ends.
    this.store((p) => p.txn === txn);
    txn.status = status;
    if (txn.xid !== undefined && txn.xid > this.latestCompleted) this.latestCompleted = txn.xid;
  }

  /**
   * One relay batch: read, publish, and (unless it fails) delete and advance; a failure resets the cursor. The
   * statement is sent, its snapshot taken `wait` ms later (a pool queue, the network), its answer back `back` ms
   * after that.
   */
  relay(fail = false, wait = 0, back = 1): void {
    const startedAt = this.now;
    this.tick(wait);
    this.store((p) => p.at <= this.now);
    const xmax = this.latestCompleted + 1n;
    const xip = this.running()
      .map((t) => t.xid)
      .filter((x): x is bigint => x !== undefined && x < xmax);
    const xmin = xip.reduce((a, b) => (b < a ? b : a), xmax);
    const plan = this.cursor.nextRead();
    const asked = (id: number) =>
      plan.full || (id > plan.after && id <= plan.upTo) || plan.gapLo.some((lo, i) => id >= lo && id <= plan.gapHi[i]);
    const ids = [...this.rows]
      .filter(([id, t]) => t.status === 'committed' && !this.deleted.has(id) && asked(id))
      .map(([id]) => id)
      .sort((a, b) => a - b)
      .slice(0, this.batch);
    const snapshot = { ids, lastTaken: this.nextId - 1, xmin, nextXid: this.nextXid };
    this.tick(back);
    const read: OutboxRead = { ...snapshot, startedAt, endedAt: this.now };
    this.emitted.push(...ids);
    if (fail) {
      this.cursor.reset();
      return;
    }
    for (const id of ids) this.deleted.add(id);
    this.cursor.advance(read);
  }

  committedIds(): number[] {
    return [...this.rows].filter(([, t]) => t.status === 'committed').map(([id]) => id);
  }
}

type Op =
  | { kind: 'begin'; task: number; xidFirst: boolean }
  | { kind: 'insert'; txn: number; count: number; delay: number }
  | { kind: 'burn' }
  | { kind: 'end'; txn: number; commit: boolean }
  | { kind: 'tick'; ms: number }
  | { kind: 'relay'; fail: boolean; wait: number; back: number };

const op: fc.Arbitrary<Op> = fc.oneof(
  { arbitrary: fc.record({ kind: fc.constant('begin' as const), task: fc.nat(4), xidFirst: fc.boolean() }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant('insert' as const), txn: fc.nat(9), count: fc.integer({ min: 1, max: 4 }), delay: fc.oneof(fc.constant(0), fc.nat(STORE_MS), fc.integer({ min: STORE_MS - 100, max: STORE_MS })) }), weight: 4 },
  { arbitrary: fc.constant({ kind: 'burn' as const }), weight: 1 },
  { arbitrary: fc.record({ kind: fc.constant('end' as const), txn: fc.nat(9), commit: fc.boolean() }), weight: 3 },
  { arbitrary: fc.record({ kind: fc.constant('tick' as const), ms: fc.oneof(fc.integer({ min: 0, max: 300 }), fc.integer({ min: 0, max: 1500 })) }), weight: 3 },
  {
    arbitrary: fc.record({ kind: fc.constant('relay' as const), fail: fc.boolean(), wait: fc.oneof(fc.constant(0), fc.nat(400)), back: fc.oneof(fc.constant(1), fc.nat(400)) }),
    weight: 4,
  },
);

function play(model: Model, ops: Op[], failures: boolean): void {
  for (const o of ops) {
    const running = model.running();
    if (o.kind === 'begin') model.begin(o.task, o.xidFirst);
    else if (o.kind === 'insert' && running.length > 0) model.insert(running[o.txn % running.length], o.count, o.delay);
    else if (o.kind === 'burn') model.burn();
    else if (o.kind === 'end' && running.length > 0) model.end(running[o.txn % running.length], o.commit ? 'committed' : 'aborted');
    else if (o.kind === 'tick') model.tick(o.ms);
    else if (o.kind === 'relay') model.relay(failures && o.fail, o.wait, o.back);
  }
  // Every transaction ends; the relay keeps reading, as it does every second, until it has nothing left to watch.
  for (const t of model.running()) model.end(t, t.task % 2 === 0 ? 'committed' : 'aborted');
  for (let i = 0; i < 200 && (model.cursor.gapCount > 0 || model.committedIds().some((id) => !model.deleted.has(id))); i++) {
    model.tick(700);
    model.relay();
  }
}

/** Per task, the ids in the order they were first published must be ascending (ids of a task are taken in order). */
function assertTaskOrder(model: Model): void {
  const seen = new Set<number>();
  const lastOfTask = new Map<number, number>();
  for (const id of model.emitted) {
    if (seen.has(id)) continue;
    seen.add(id);
    const task = (model.rows.get(id) as Txn).task;
    const last = lastOfTask.get(task);
    assert.ok(last === undefined || last < id, `task ${task}: id ${id} published after ${last}`);
    lastOfTask.set(task, id);
  }
}

const sorted = (ids: number[]) => [...ids].sort((a, b) => a - b);

test('every committed row is published exactly once and in per-task order, whatever the interleaving', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 80, size: 'max' }), fc.integer({ min: 1, max: 6 }), fc.integer({ min: 2, max: 12 }), (ops, batch, maxGaps) => {
      const model = new Model(new OutboxCursor({ batch, maxGaps }), batch);
      play(model, ops, false);
      assert.deepEqual(sorted(model.emitted), sorted(model.committedIds()), 'each committed id once, nothing else');
      assertTaskOrder(model);
      assert.equal(model.cursor.gapCount, 0, 'no gap left once every transaction ended');
    }),
    fuzzParameters(1000),
  );
});

test('with failed batches (reset, rows read again) every committed row is still published, and only those', () => {
  fc.assert(
    fc.property(fc.array(op, { maxLength: 80, size: 'max' }), fc.integer({ min: 1, max: 6 }), (ops, batch) => {
      const model = new Model(new OutboxCursor({ batch }), batch);
      play(model, ops, true);
      assert.deepEqual([...new Set(model.emitted)].sort((a, b) => a - b), sorted(model.committedIds()));
      assertTaskOrder(model);
    }),
    fuzzParameters(500),
  );
});

test('a transaction that took its xid before a neighbour committed, and is not in the snapshot, keeps its gap open', () => {
  // A: xid 100 (it wrote something else first). B: takes id 1 and xid 101, stays open. A takes id 2 and commits:
  // the latest completed xid is 100, so snapshots have xmax 101 and list no running xid, yet B is running.
  const model = new Model(new OutboxCursor({ batch: 10 }), 10);
  model.begin(0, true);
  model.begin(1, false);
  const [a, b] = model.running();
  model.insert(b, 1, 0);
  model.insert(a, 1, 0);
  model.end(a, 'committed');
  model.relay();
  assert.deepEqual(model.emitted, [2]);
  assert.deepEqual(model.cursor.gapRanges(), [{ lo: 1, hi: 1 }]);
  for (let i = 0; i < 5; i++) {
    model.tick(1000);
    model.relay();
  }
  // The horizon is the next xid (102), not the snapshot's xmax (101, which xmin already equals).
  assert.deepEqual(model.cursor.gapRanges(), [{ lo: 1, hi: 1 }], 'B may still commit id 1');
  model.end(b, 'committed');
  model.relay();
  assert.deepEqual(model.emitted, [2, 1]);
  assert.equal(model.cursor.gapCount, 0);
});

const snapshot = { xmin: 100n, nextXid: 100n };
const readAt = (at: number, ids: number[], lastTaken: number, xids = snapshot): OutboxRead => ({ ids, lastTaken, ...xids, startedAt: at, endedAt: at + 1 });

test('the first read is a full read; later reads ask for the window above the cursor and the gaps', () => {
  const cursor = new OutboxCursor({ batch: 5 });
  assert.deepEqual(cursor.nextRead(), { full: true });
  // Ids 1..9 were deleted long ago, 12 is in flight: gaps [1, 9] and [12, 12]; the cursor stops at lastTaken.
  assert.deepEqual(cursor.advance(readAt(0, [10, 11, 13], 14, { xmin: 90n, nextXid: 100n })), { overflow: false, more: false });
  assert.deepEqual(cursor.gapRanges(), [{ lo: 1, hi: 9 }, { lo: 12, hi: 12 }, { lo: 14, hi: 14 }]);
  assert.deepEqual(cursor.nextRead(), { full: false, after: 14, upTo: 19, gapLo: [1, 12, 14], gapHi: [9, 12, 14] });
  // 12 commits: read from its gap, which closes. Not yet armed (less than 1 s): [1, 9] and [14, 14] stay.
  cursor.advance(readAt(500, [12], 14, { xmin: 90n, nextXid: 100n }));
  assert.deepEqual(cursor.gapRanges(), [{ lo: 1, hi: 9 }, { lo: 14, hi: 14 }]);
  // 1 s later: armed with horizon 100, but xmin 99 < 100, so a transaction that may hold one of them still runs.
  cursor.advance(readAt(1001, [], 14, { xmin: 99n, nextXid: 100n }));
  assert.equal(cursor.gapCount, 2);
  // Every transaction running back then has ended: dropped.
  cursor.advance(readAt(1500, [], 14, { xmin: 100n, nextXid: 105n }));
  assert.equal(cursor.gapCount, 0);
});

test('a gap is armed and dropped by one read when no transaction runs at all', () => {
  const cursor = new OutboxCursor({ batch: 5 });
  cursor.advance(readAt(0, [1, 3], 3));
  assert.deepEqual(cursor.gapRanges(), [{ lo: 2, hi: 2 }]);
  cursor.advance(readAt(999, [], 3, { xmin: 100n, nextXid: 100n }));
  assert.equal(cursor.gapCount, 1, 'not armed before GAP_ARM_MS after the read that found it ended');
  cursor.advance(readAt(1001, [], 3, { xmin: 100n, nextXid: 100n }));
  assert.equal(cursor.gapCount, 0);
});

test('a gap is armed counting from when the read that found it ended, not from when it was sent', () => {
  // The read was sent at 0 and waited for a connection: its snapshot, taken at 400, saw id 2; id 1 was taken at 300
  // by a transaction that stores its row, and so gets its xid (102), up to 999 ms later.
  const cursor = new OutboxCursor({ batch: 5 });
  cursor.advance({ ids: [2], lastTaken: 2, xmin: 102n, nextXid: 102n, startedAt: 0, endedAt: 401 });
  // 1,100 ms after the read was sent nothing runs, but id 1's transaction may not have its xid yet: not armed.
  cursor.advance({ ids: [], lastTaken: 2, xmin: 102n, nextXid: 102n, startedAt: 1100, endedAt: 1101 });
  assert.deepEqual(cursor.gapRanges(), [{ lo: 1, hi: 1 }]);
  // Armed once a second has passed since 401: xid 102 is running, below the horizon 103.
  cursor.advance({ ids: [], lastTaken: 2, xmin: 102n, nextXid: 103n, startedAt: 1401, endedAt: 1402 });
  assert.deepEqual(cursor.gapRanges(), [{ lo: 1, hi: 1 }]);
  cursor.advance({ ids: [1], lastTaken: 2, xmin: 103n, nextXid: 103n, startedAt: 1500, endedAt: 1501 });
  assert.equal(cursor.gapCount, 0);
});

test('a gap is not dropped by a read its LIMIT cut below the gap, and splits around rows read inside it', () => {
  const cursor = new OutboxCursor({ batch: 3 });
  cursor.advance(readAt(0, [10], 10));
  assert.deepEqual(cursor.gapRanges(), [{ lo: 1, hi: 9 }]);
  // Rows committed inside the gap split it; armed (horizon 100), but a transaction below 100 still runs.
  cursor.advance(readAt(2000, [2, 3, 5], 10, { xmin: 99n, nextXid: 100n }));
  assert.deepEqual(cursor.gapRanges(), [{ lo: 1, hi: 1 }, { lo: 4, hi: 4 }, { lo: 6, hi: 9 }]);
  // Those have ended now, but the LIMIT (3 rows) cut the answer at 8: what lies above it in [9, 9] was not read.
  cursor.advance(readAt(2100, [6, 7, 8], 10));
  assert.deepEqual(cursor.gapRanges(), [{ lo: 9, hi: 9 }]);
  // Not cut: everything asked for came back.
  cursor.advance(readAt(2200, [], 10));
  assert.equal(cursor.gapCount, 0);
});

test('an empty window moves the cursor by one batch and asks to read again while ids were taken above it', () => {
  const cursor = new OutboxCursor({ batch: 5 });
  cursor.advance(readAt(0, [1], 1));
  // Ids 2..20 taken by one transaction still running: nothing visible in (1, 6].
  assert.deepEqual(cursor.advance(readAt(10, [], 20)), { overflow: false, more: true });
  assert.deepEqual(cursor.nextRead(), { full: false, after: 6, upTo: 11, gapLo: [2], gapHi: [6] });
  // A full batch means the LIMIT may have cut the answer: the cursor stops at the last row read.
  assert.deepEqual(cursor.advance(readAt(20, [7, 8, 9, 10, 11], 20)), { overflow: false, more: true });
  assert.deepEqual(cursor.nextRead(), { full: false, after: 11, upTo: 16, gapLo: [2], gapHi: [6] });
});

test('more gaps than the bound: the cursor starts over with a full read', () => {
  const cursor = new OutboxCursor({ batch: 10, maxGaps: 3 });
  assert.deepEqual(cursor.advance(readAt(0, [2, 4, 6], 6)), { overflow: false, more: false });
  assert.equal(cursor.gapCount, 3);
  assert.deepEqual(cursor.advance(readAt(10, [8], 8)), { overflow: true, more: true });
  assert.equal(cursor.gapCount, 0);
  assert.deepEqual(cursor.nextRead(), { full: true });
});
