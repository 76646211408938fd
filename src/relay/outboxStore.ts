import { notifyAfterCommit, prepared, type Queryable } from '../db/pool.js';
import { OUTBOX_DELETE_INDEXING } from '../indexService/completions.js';
import type { QueueExchange } from '../exchanges/exchanges.js';
import { OUTBOX_CHANNEL } from '../exchanges/outbox.js';
import type { OutboxReadPlan } from './outboxCursor.js';
import { taskAsDefinedSql } from '../queue/taskRow.js';
import { RECORD_SIGNALS_SQL, signalRow, type GraphSignalRow } from './graphSignalStore.js';

/**
 * The relay's statements on the outbox (migration 001), its deferred lane (outbox_deferred, migration 021) and its
 * dead letters (outbox_dead_letters, migration 028): reads, deletes of published rows, the move of rows that can
 * never be published. The writers' side (enqueueMessages) is src/exchanges/outbox.ts.
 */

/** The most rows a read returns: every batch costs a lock-session round trip, a read, a confirm wait and a delete. */
export const OUTBOX_BATCH = 500;

export interface OutboxRow {
  id: number;
  message_id: string;
  exchange: string;
  routing_key: string;
  cc: string[];
  payload: unknown;
  render: QueueExchange | null;
  /** A row of the deferred lane (outbox_deferred): its id is the lane's own, not an outbox id. */
  deferred?: boolean;
}

/** The outbox's columns as OutboxRow has them. */
export const OUTBOX_COLUMNS = 'id, message_id, exchange, routing_key, cc, payload, render';
/**
 * The deferred lane's rows as OutboxRow's columns, read FROM outbox_deferred (they are all rendered: no exchange, key
 * or cc of their own). A row written without a payload (migration 029) gets its task's row as defined; one whose task
 * is gone gets NULL, which cannot be rendered, so the relay sets it aside.
 */
export const DEFERRED_COLUMNS = `id, message_id, '' AS exchange, '' AS routing_key, '{}'::text[] AS cc,
  COALESCE(payload, ${taskAsDefinedSql('outbox_deferred.task_id')}) AS payload, render`;

/**
 * The first row of every read's answer (its id is NULL): what the read's snapshot saw, for the cursor
 * (src/relay/outboxCursor.ts). One statement, so the same snapshot as the rows. `next_xid` is the next
 * xid Postgres would assign: age(x) counts from it, so xmax + age(xmax) is it (as a 64-bit xid; the snapshot's
 * own xmax is only one past the latest completed xid). `last_taken`: the highest id the sequence handed out.
 */
const READ_HEADER = `SELECT NULL::bigint AS id, NULL::text AS message_id, NULL::text AS exchange, NULL::text AS routing_key,
         NULL::text[] AS cc, NULL::jsonb AS payload, NULL::text AS render,
         pg_snapshot_xmin(s)::text AS xmin,
         (pg_snapshot_xmax(s)::text::bigint + age(pg_snapshot_xmax(s)::xid))::text AS next_xid,
         (SELECT CASE WHEN is_called THEN last_value ELSE last_value - 1 END FROM outbox_id_seq) AS last_taken,
         NULL::boolean AS deferred, NULL::jsonb AS heard
    FROM pg_current_snapshot() AS s`;

/**
 * A read's answer: the header, the outbox rows `r` read, and the deferred lane's rows of the tasks those rows are
 * about (migration 021), all in one snapshot. A task's deferred message (its task-defined) committed before any
 * other message of the task could be written (nothing else can name the task until its graph's transaction has
 * committed), so a read that sees a later message of a task sees its deferred one too, and the relay publishes it
 * first. The task is `status.taskId` of a message as written, `row.task_id` of a row written for rendering.
 * With `lane`, the same statement records the graph signals of the resolutions read (src/relay/graphSignalStore.ts)
 * and returns the rows it recorded (`heard`): a read that records rows commits them before the relay publishes or
 * signals anything, and one that records none writes nothing (no xid, no WAL flush). The recording's xid, taken
 * during the statement after its snapshot, can be what age() counts from in the header's next_xid: it is still
 * above every xid taken before the snapshot, which is all the cursor needs of next_xid (src/relay/outboxCursor.ts 3).
 */
const readAnswer = (rows: string, lane: boolean) => `WITH r AS MATERIALIZED (${rows})${lane ? `,
  heard AS (${RECORD_SIGNALS_SQL})` : ''}
  ${READ_HEADER}
  UNION ALL SELECT ${OUTBOX_COLUMNS}, NULL, NULL, NULL, false, NULL FROM r
  UNION ALL SELECT ${DEFERRED_COLUMNS}, NULL, NULL, NULL, true, NULL FROM outbox_deferred
    WHERE task_id IN (SELECT COALESCE(r.payload->'row'->>'task_id', r.payload->'status'->>'taskId') FROM r)${lane ? `
  UNION ALL SELECT NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, to_jsonb(heard) FROM heard` : ''}`;

/** The first OUTBOX_BATCH rows by id (the read after a reset, or every read if the cursor cannot be used). */
const fullRead = (lane: boolean) => readAnswer(`SELECT ${OUTBOX_COLUMNS} FROM outbox ORDER BY id LIMIT ${OUTBOX_BATCH}`, lane);

/**
 * The lowest OUTBOX_BATCH rows among the cursor's window ($1, $2] and the gaps [$3[i], $4[i]]. EXPLAIN (Postgres 15,
 * generic plan; an outbox of 300,000 ids, all but the last 1,000 deleted, 3 gaps): a Merge Append of an index
 * scan from the cursor and a nested loop of one index probe per gap, 500 rows in 0.9 ms and 22 buffers, where
 * the full read took 4.7 ms and 3,704 buffers. A read touches no more than the window's and the gaps' ids whatever
 * plan is chosen, so a named statement is safe: a generic plan of `id > $1` without the window's end scanned
 * all 100,600 rows above the cursor and sorted them (178 ms).
 */
const cursorRead = (lane: boolean) => readAnswer(`SELECT ${OUTBOX_COLUMNS} FROM (
      (SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE id > $1 AND id <= $2 ORDER BY id LIMIT ${OUTBOX_BATCH})
      UNION ALL
      (SELECT o.* FROM unnest($3::bigint[], $4::bigint[]) AS gap(lo, hi)
         CROSS JOIN LATERAL (SELECT ${OUTBOX_COLUMNS} FROM outbox WHERE id BETWEEN gap.lo AND gap.hi ORDER BY id LIMIT ${OUTBOX_BATCH}) o)
      ORDER BY id LIMIT ${OUTBOX_BATCH}) w`, lane);
/** The cursor read as a relay with the graph-signal lane makes it. */
export const CURSOR_READ = cursorRead(true);
const READS = { full: [fullRead(false), fullRead(true)], cursor: [cursorRead(false), CURSOR_READ] };

/** The deferred lane's first OUTBOX_BATCH rows, published between the outbox's batches. */
const DEFERRED_READ = `SELECT ${DEFERRED_COLUMNS}, true AS deferred FROM outbox_deferred ORDER BY id LIMIT ${OUTBOX_BATCH}`;

/** Deletes the outbox rows $1 and the deferred lane's rows $2 (published and confirmed). */
export const OUTBOX_DELETE = 'WITH d AS (DELETE FROM outbox_deferred WHERE id = ANY($2)) DELETE FROM outbox WHERE id = ANY($1)';

/** The outbox sequence's cache: the cursor needs ids handed out in increasing order over time (CACHE 1). */
const SEQUENCE_CACHE = `SELECT seqcache AS cache FROM pg_sequence WHERE seqrelid = 'outbox_id_seq'::regclass`;

interface ReadHeader {
  xmin: string;
  next_xid: string;
  last_taken: number;
}

/** What a read of the outbox returned: its rows, the deferred rows of their tasks, and what the cursor needs of it. */
export interface OutboxReadAnswer {
  /** the outbox rows, by id */
  batch: OutboxRow[];
  /** the deferred lane's rows of the batch's tasks, by the lane's id (published ahead of the batch) */
  pulled: OutboxRow[];
  /** the graph signals the read recorded (a read with the lane only) */
  heard: GraphSignalRow[];
  xmin: bigint;
  nextXid: bigint;
  lastTaken: number;
  /** when the statement was sent and its answer arrived (performance.now()) */
  startedAt: number;
  endedAt: number;
}

/**
 * Reads the rows `plan` asks for (src/relay/outboxCursor.ts) with the deferred rows of their tasks; `lane`: and records
 * the graph signals of the resolutions among them (src/relay/graphSignalStore.ts).
 */
export async function readOutbox(db: Queryable, plan: OutboxReadPlan, lane = false): Promise<OutboxReadAnswer> {
  const startedAt = performance.now();
  const i = lane ? 1 : 0;
  const { rows } = await db.query<OutboxRow & ReadHeader & { heard: GraphSignalRow | null }>(
    plan.full ? prepared(READS.full[i], []) : prepared(READS.cursor[i], [plan.after, plan.upTo, plan.gapLo, plan.gapHi]),
  );
  const endedAt = performance.now();
  const heard = rows.flatMap((r) => (r.heard ? [signalRow(r.heard)] : []));
  const header = rows.find((r) => r.id === null && !r.heard);
  if (!header) throw new Error('outbox read: no snapshot row');
  const byId = (a: OutboxRow, b: OutboxRow) => a.id - b.id;
  const batch = rows.filter((r) => r.id !== null && !r.deferred).sort(byId);
  const pulled = rows.filter((r) => r.deferred).sort(byId);
  return { batch, pulled, heard, xmin: BigInt(header.xmin), nextXid: BigInt(header.next_xid), lastTaken: Number(header.last_taken), startedAt, endedAt };
}

/** The deferred lane's first OUTBOX_BATCH rows. */
export async function readDeferredLane(db: Queryable): Promise<OutboxRow[]> {
  return (await db.query<OutboxRow>(prepared(DEFERRED_READ, []))).rows;
}

/**
 * Deletes published rows of both lanes; `toIndex`: the completed tasks among them with `index.` routes, indexed by
 * the same statement (src/indexService/completions.ts).
 */
export async function deletePublished(db: Queryable, rows: OutboxRow[], toIndex: string[]): Promise<void> {
  const ids = [rows.filter((r) => !r.deferred).map((r) => r.id), rows.filter((r) => r.deferred).map((r) => r.id)];
  await db.query(toIndex.length === 0 ? prepared(OUTBOX_DELETE, ids) : prepared(OUTBOX_DELETE_INDEXING, [...ids, toIndex]));
}

/** The outbox id sequence's CACHE (undefined: no such sequence). */
export async function outboxSequenceCache(db: Queryable): Promise<number | undefined> {
  const { rows } = await db.query<{ cache: number }>(SEQUENCE_CACHE);
  return rows[0]?.cache;
}

/**
 * Moves outbox rows $1 (reasons $2) and deferred rows $3 (reasons $4) to outbox_dead_letters (migration 028): the
 * delete and the insert are one statement, so a row is in exactly one of the tables whatever fails. Returns the rows
 * moved (a row another relay moved first is not among them, so it is logged once).
 */
const DEAD_LETTER = `WITH o_dead AS (SELECT * FROM unnest($1::bigint[], $2::text[]) AS x(id, reason)),
    d_dead AS (SELECT * FROM unnest($3::bigint[], $4::text[]) AS x(id, reason)),
    o AS (DELETE FROM outbox WHERE id IN (SELECT id FROM o_dead) RETURNING *),
    d AS (DELETE FROM outbox_deferred WHERE id IN (SELECT id FROM d_dead) RETURNING *)
  INSERT INTO outbox_dead_letters (lane, source_id, message_id, exchange, routing_key, cc, payload, render, task_id, created, reason)
  SELECT * FROM (
    SELECT 'outbox', o.id, o.message_id, o.exchange, o.routing_key, o.cc, o.payload, o.render, NULL, o.created, o_dead.reason
      FROM o JOIN o_dead USING (id)
    UNION ALL
    SELECT 'deferred', d.id, d.message_id, '', '', '{}', COALESCE(d.payload, ${taskAsDefinedSql('d.task_id')}, 'null'), d.render,
           d.task_id, d.created, d_dead.reason
      FROM d JOIN d_dead USING (id)) moved(lane, source_id)
  -- the order they were to be published in (a deferred row goes ahead of the outbox's): dead letters' ids keep it
  ORDER BY lane = 'outbox', source_id
  RETURNING id, lane, source_id, message_id`;

/** A row set aside: its id in outbox_dead_letters, the lane and id it had, its message id. */
export interface DeadLetter {
  id: number;
  lane: 'outbox' | 'deferred';
  source_id: number;
  message_id: string;
}

/** Moves rows that can never be published to outbox_dead_letters with their reasons; returns those moved. */
export async function moveToDeadLetters(db: Queryable, rows: Array<{ row: OutboxRow; reason: string }>): Promise<DeadLetter[]> {
  const outbox = rows.filter((r) => !r.row.deferred);
  const deferred = rows.filter((r) => r.row.deferred);
  const { rows: moved } = await db.query<DeadLetter>(
    prepared(DEAD_LETTER, [outbox.map((r) => r.row.id), outbox.map((r) => r.reason), deferred.map((r) => r.row.id), deferred.map((r) => r.reason)]),
  );
  return moved.sort((a, b) => a.id - b.id);
}



/** A dead letter as `tgs dead-letters list` shows it. */
export interface DeadLetterRow extends DeadLetter {
  exchange: string;
  render: string | null;
  reason: string;
  dead_lettered_at: Date;
}

/** Every row of outbox_dead_letters (without its payload), in order. */
export async function listDeadLetters(db: Queryable): Promise<DeadLetterRow[]> {
  const { rows } = await db.query<DeadLetterRow>(
    'SELECT id, lane, source_id, message_id, exchange, render, reason, dead_lettered_at FROM outbox_dead_letters ORDER BY id',
  );
  return rows;
}

/**
 * Writes the dead letters `ids` back to the outbox as new rows, in their order, and removes them, in one statement
 * (the replay docs/operations.md § Dead-lettered messages shows in SQL); then wakes the relay. A row still
 * unpublishable comes back to outbox_dead_letters with a new id. Returns the dead letters' ids that were replayed.
 */
export async function replayDeadLetters(db: Queryable, ids: number[]): Promise<number[]> {
  const { rows } = await db.query<{ id: number }>(
    `WITH r AS (DELETE FROM outbox_dead_letters WHERE id = ANY($1::bigint[]) RETURNING *),
       o AS (INSERT INTO outbox (message_id, exchange, routing_key, cc, payload, render)
             SELECT message_id, exchange, routing_key, cc, payload, render FROM r ORDER BY id)
     SELECT id FROM r ORDER BY id`,
    [ids],
  );
  if (rows.length > 0) await notifyAfterCommit(db, OUTBOX_CHANNEL, ['']);
  return rows.map((r) => r.id);
}

/** Deletes the dead letters `ids` for good; returns the ids deleted. */
export async function dropDeadLetters(db: Queryable, ids: number[]): Promise<number[]> {
  const { rows } = await db.query<{ id: number }>('DELETE FROM outbox_dead_letters WHERE id = ANY($1::bigint[]) RETURNING id', [ids]);
  return rows.map((r) => r.id).sort((a, b) => a - b);
}
