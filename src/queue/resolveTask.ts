import type pg from 'pg';
import type { Config } from '../config.js';
import { anyOf, notifySoon, prepared } from '../db/pool.js';
import { TgsError, type ErrorCode } from '../errors.js';
import { StatementBatcher } from '../db/statementBatcher.js';
import { reportsPerStatement } from '../observability/metrics.js';
import { OUTBOX_CHANNEL, outboxInsert, outboxRows, type OutboxMessage } from '../exchanges/outbox.js';
import { resolutionMessage, resolutionMessagesInsert, taskMessage } from './messages.js';
import { PENDING_CHANNEL } from './notify.js';
import { EXCEPTION_REASONS, MAX_RUNS } from './run.js';
import type { GroupAnnouncer } from './groupAnnouncer.js';
import { logResolved, type LineLog, type ResolvedRun } from './auditLines.js';
import { addPendingRun, loadTask, loadTasks, mayRetry, resolveLatestRun, taskStatus, TASK_COLUMNS, type Run, type TaskRow, type TaskStatus } from './taskRow.js';

/**
 * Writes a report in one statement (one round trip, no explicit transaction), compare-and-set on the runs
 * the report was computed from: the task row and its messages commit together or not at all. Updates no
 * row when the task changed since it was read (a reclaim, a sweep): the caller reads again. The group's
 * task-group-resolved check follows the commit (GroupAnnouncer).
 */
const REPORT_SQL = `WITH reported AS (
    UPDATE tasks SET state = $3, runs = $4::jsonb, retries_left = $5, taken_until = NULL, pending_since = $6::timestamptz
    WHERE task_id = $1 AND runs = $2::jsonb
    RETURNING task_id
  ), messages AS (
    ${outboxInsert('$7')}
    WHERE EXISTS (SELECT 1 FROM reported)
    ORDER BY m.n
  )
  SELECT count(*) AS reported FROM reported`;

/**
 * REPORT_SQL for many tasks at once: one compare-and-set per task row ($1, sorted by taskId), the messages ($3)
 * of the rows that were written, in their order ($4 names each message's task). The rows the statement did not
 * write come back missing from its answer.
 */
const REPORTS_SQL = `WITH reported AS (
    UPDATE tasks t SET state = v.state, runs = v.runs, retries_left = v.retries_left, taken_until = NULL, pending_since = v.pending_since
    FROM jsonb_to_recordset($1::jsonb) AS v(task_id text, read_runs jsonb, state text, runs jsonb, retries_left int, pending_since timestamptz)
    WHERE t.task_id = v.task_id AND t.runs = v.read_runs AND t.task_id = ${anyOf('$2', 'text')}
    RETURNING t.task_id
  ), messages AS (
    ${outboxInsert('$3')}
    WHERE ($4::text[])[m.n::int] IN (SELECT task_id FROM reported)
    ORDER BY m.n
  )
  SELECT task_id FROM reported`;

/**
 * The common report, a running latest run resolved without a retry, in one statement with no read before it: each
 * run resolved in SQL as resolveLatestRun does it in JavaScript, and its message written as the row's snapshot for the
 * relay to render (as a claim's task-running is), in the items' order. `items` is the relation `v` of the reports
 * (run_id, state, reason: reasonResolved, n: the order), `match` ties a task row to its report, `time` is the time
 * resolved. A report it does not fit (a repeated report, a run that is not the running latest, a task or run that
 * does not exist) changes no row and writes no message, and goes the read-check-write way, which answers it. The read
 * it saves was 0.03 ms of Postgres' statement time a report, and a round trip with its rows parsed in the API.
 */
const resolveRunningSql = (items: string, match: string, time: string) => `WITH reported AS (
    UPDATE tasks t SET state = v.state, taken_until = NULL, pending_since = NULL,
      runs = jsonb_set(t.runs, ARRAY[v.run_id::text],
        (t.runs -> -1) || jsonb_build_object('state', v.state, 'reasonResolved', v.reason, 'resolved', ${time}::text))
    FROM ${items}
    WHERE ${match} AND jsonb_array_length(t.runs) - 1 = v.run_id AND t.runs -> -1 ->> 'state' = 'running'
    RETURNING t.*, v.n
  ), announced AS (
    ${resolutionMessagesInsert('reported', 'n')}
  )
  SELECT ${TASK_COLUMNS} FROM reported`;

/** One report: $1 taskId, $2 runId, $3 outcome, $4 reasonResolved, $5 the time. */
const RESOLVE_ONE_SQL = resolveRunningSql('(SELECT $2::int AS run_id, $3::text AS state, $4::text AS reason, 1 AS n) v', 't.task_id = $1', '$5');

/**
 * Many reports, each task once: $1 the items as JSON (sorted by taskId, as a lock order; `n` is each one's place in the
 * batch), $2 their taskIds, $3 the time. JSON, not arrays: Postgres sees an array's length in `unnest` and planned
 * every call for it (0.46 ms of its CPU a report, where a generic plan costs 0.21).
 */
const RESOLVE_MANY_SQL = resolveRunningSql(
  'jsonb_to_recordset($1::jsonb) AS v(task_id text, run_id int, state text, reason text, n int)',
  `t.task_id = v.task_id AND t.task_id = ${anyOf('$2', 'text')}`,
  '$3',
);

/** The exception reasons that retry the task while retries are left (a new run, reasonCreated retry / task-retry). */
const retries = (state: Outcome, reason: string | undefined) => state === 'exception' && (reason === 'worker-shutdown' || reason === 'intermittent-task');

/** A report's reasonResolved: the exception's reason, else the outcome itself. */
const reasonResolvedOf = (state: Outcome, reason: string | undefined) => (state === 'exception' ? (reason as string) : state);

/** Whether RESOLVE_ONE_SQL / RESOLVE_MANY_SQL may take a report: no retry to add, and a runId a task can have. */
const resolvesInOne = (r: Resolution) => !retries(r.outcome, r.reason) && Number.isInteger(r.runId) && r.runId >= 0 && r.runId < MAX_RUNS;

/**
 * Reports of distinct tasks in one statement: the rows it wrote, by taskId, not yet announced. None when the statement
 * lost a deadlock with another writer (rolled back: nothing written; the caller's other way follows).
 */
async function resolveRunning(pool: pg.Pool, items: Resolution[]): Promise<Map<string, TaskRow>> {
  let rows: TaskRow[];
  try {
    const reasonResolved = (r: Resolution) => reasonResolvedOf(r.outcome, r.reason);
    const time = new Date().toISOString();
    ({ rows } = await pool.query<TaskRow>(
      items.length === 1
        ? prepared(RESOLVE_ONE_SQL, [items[0].taskId, items[0].runId, items[0].outcome, reasonResolved(items[0]), time])
        : prepared(RESOLVE_MANY_SQL, [
            JSON.stringify(
              items
                .map((r, n) => ({ task_id: r.taskId, run_id: r.runId, state: r.outcome, reason: reasonResolved(r), n }))
                .sort((a, b) => (a.task_id < b.task_id ? -1 : a.task_id > b.task_id ? 1 : 0)),
            ),
            items.map((r) => r.taskId).sort(),
            time,
          ]),
    ));
  } catch (err) {
    if ((err as { code?: string }).code === DEADLOCK_DETECTED) return new Map();
    throw err;
  }
  return new Map(rows.map((row) => [row.task_id, row]));
}

/** A single report waiting for its statement, with the announcer of the caller that made it and where its line goes. */
interface QueuedReport {
  item: Resolution;
  groups: Pick<GroupAnnouncer, 'note'>;
  audit?: ReportAudit;
}

/** Where a single report's `tasks <outcome>` line goes (one line per statement), and the request that made it. */
export interface ReportAudit {
  log: LineLog;
  reqId?: string;
}

/**
 * Single reports made at once share one statement (RESOLVE_MANY_SQL): the reports read in one turn of the event loop go
 * together (gatherTurn: a worker's reports of one claim arrive on as many sockets in one poll, and went 1, 1 and the rest
 * while two lanes were free; claim + complete's Postgres transactions a task fell from 0.64-0.77 to 0.49-0.56,
 * docs/bench-journal/2026-11-28.md § Late morning of 2026-11-28), and while REPORT_LANES of them are in flight on a
 * pool, the reports that arrive wait and go together when one returns. A report alone waits one turn. With 16
 * workers claiming up to 8 tasks a call, claim + complete went from 322-330 to 472-534 tasks/s and Postgres' CPU a task
 * from 1.63 to 0.84-0.89 ms (docs/bench-journal/2026-11-26.md § Afternoon of 2026-11-26). Two lanes, not one: a statement waiting
 * on a row lock (up to Postgres' 1 s deadlock_timeout when it ends in a deadlock) then holds half the reports, not all;
 * two measured within the runs' spread of one (481 tasks/s at 3.77 ms a task, against 472-534 at 3.45-3.60 with one).
 */
const REPORT_LANES = 2;
const MAX_REPORTS_A_STATEMENT = 64;
const reportBatchers = new WeakMap<pg.Pool, StatementBatcher<QueuedReport, TaskRow | undefined>>();

function reportBatcher(pool: pg.Pool): StatementBatcher<QueuedReport, TaskRow | undefined> {
  let batcher = reportBatchers.get(pool);
  if (!batcher) {
    batcher = new StatementBatcher(
      async (queued: QueuedReport[]) => {
        const written = await resolveRunning(pool, queued.map((q) => q.item));
        const rows = queued.map((q) => written.get(q.item.taskId));
        const byAnnouncer = new Map<Pick<GroupAnnouncer, 'note'>, TaskRow[]>();
        for (const [i, row] of rows.entries()) {
          if (!row) continue;
          const list = byAnnouncer.get(queued[i].groups);
          if (list) list.push(row);
          else byAnnouncer.set(queued[i].groups, [row]);
        }
        for (const [groups, announced] of byAnnouncer) announceReports(pool, groups, announced);
        logStatement(queued, rows);
        return rows;
      },
      { lanes: REPORT_LANES, maxItems: MAX_REPORTS_A_STATEMENT, key: (q) => q.item.taskId, onBatch: (size) => reportsPerStatement.observe(size), gatherTurn: true },
    );
    reportBatchers.set(pool, batcher);
  }
  return batcher;
}

/** One line per outcome for the reports a statement wrote, on the log of its first audited report. */
function logStatement(queued: QueuedReport[], rows: (TaskRow | undefined)[]): void {
  const audited = queued.flatMap((q, i) => {
    const row = rows[i];
    return q.audit && row ? [{ audit: q.audit, run: resolvedRun(q.item, row.task_group_id, q.audit) }] : [];
  });
  if (audited.length > 0) logResolved(audited[0].audit.log, audited.map((a) => a.run));
}

const resolvedRun = (item: Resolution, taskGroupId: string, audit: ReportAudit): ResolvedRun => ({
  taskId: item.taskId,
  runId: item.runId,
  taskGroupId,
  outcome: item.outcome,
  ...(item.reason ? { reason: item.reason } : {}),
  ...(audit.reqId === undefined ? {} : { reqId: audit.reqId }),
});

// A report races only with its own run's reclaim and the sweeps: a few rereads at most.
const MAX_REPORT_ATTEMPTS = 20;

type Outcome = 'completed' | 'failed' | 'exception';

/** What a report does to the task row it read: nothing (the same report again), or a write. */
type ReportPlan =
  | { write: false; status: TaskStatus }
  | { write: true; readRuns: Run[]; row: TaskRow; messages: OutboxMessage[] };

/**
 * The checks and the change of one report, on a row as read (changed in place when there is a write).
 * Reporting the same result again changes nothing; anything else on a run that is not running is a 409.
 * worker-shutdown and intermittent-task retry the task (new run, reasonCreated retry / task-retry) while
 * retries are left and it has fewer than 50 runs (mayRetry).
 */
function planReport(config: Config, row: TaskRow | undefined, taskId: string, runId: number, state: Outcome, reason: string | undefined, now: Date): ReportPlan {
  if (!row) throw new TgsError('ResourceNotFound', `task ${taskId} not found`);
  const run = row.runs[runId];
  if (!run) throw new TgsError('ResourceNotFound', `task ${taskId} has no run ${runId}`);
  const reasonResolved = reasonResolvedOf(state, reason);
  if (run.state === state && run.reasonResolved === reasonResolved) return { write: false, status: taskStatus(row) };
  if (run.state !== 'running' || runId !== row.runs.length - 1) {
    throw new TgsError('RequestConflict', `run ${runId} of task ${taskId} is ${run.state}, not running`);
  }
  const readRuns = row.runs;
  resolveLatestRun(row, state, reasonResolved, now);
  const messages: OutboxMessage[] = [resolutionMessage(config, row, runId)];
  if (retries(state, reason) && mayRetry(row)) {
    row.retries_left--;
    const retry = addPendingRun(row, reason === 'worker-shutdown' ? 'retry' : 'task-retry', now);
    messages.push(taskMessage(config, 'task-pending', row, retry.runId));
  }
  return { write: true, readRuns, row, messages };
}

/** The time a pending row waits from (claimWork's FIFO), null for the rest. */
const pendingSince = (row: TaskRow) => (row.state === 'pending' ? row.runs[row.runs.length - 1].scheduled : null);

/** After reports committed: wake the relay, the claimers of tasks that became pending, the group check of the rest. */
function announceReports(pool: pg.Pool, groups: Pick<GroupAnnouncer, 'note'>, rows: TaskRow[]): void {
  notifySoon(pool, OUTBOX_CHANNEL, '');
  for (const row of rows) {
    if (row.state === 'pending') notifySoon(pool, PENDING_CHANNEL, `${row.provisioner_id}/${row.worker_type}`);
    else groups.note(row.task_group_id);
  }
}

const keptChanging = (taskId: string, runId: number) =>
  new TgsError('InternalServerError', `task ${taskId} kept changing while run ${runId} was being reported; report again`);

/**
 * reportCompleted / reportFailed / reportException (see planReport). With `audit`, the report is named in a
 * `tasks <outcome>` line: its statement's, shared with the reports written with it.
 */
export async function resolveRun(
  pool: pg.Pool,
  config: Config,
  groups: Pick<GroupAnnouncer, 'note'>,
  taskId: string,
  runId: number,
  state: Outcome,
  reason?: string,
  audit?: ReportAudit,
): Promise<TaskStatus> {
  const item: Resolution = { taskId, runId, outcome: state, reason: reason as Resolution['reason'] };
  if (resolvesInOne(item)) {
    const row = await reportBatcher(pool).submit(audit ? { item, groups, audit } : { item, groups });
    if (row) return taskStatus(row);
  }
  const answered = (status: TaskStatus) => {
    if (audit) logResolved(audit.log, [resolvedRun(item, status.taskGroupId, audit)]);
    return status;
  };
  for (let attempt = 1; ; attempt++) {
    const plan = planReport(config, await loadTask(pool, taskId), taskId, runId, state, reason, new Date());
    if (!plan.write) return answered(plan.status);
    const { row } = plan;
    const { rows } = await pool.query<{ reported: number }>(
      prepared(REPORT_SQL, [
        taskId,
        JSON.stringify(plan.readRuns),
        row.state,
        JSON.stringify(row.runs),
        row.retries_left,
        pendingSince(row),
        JSON.stringify(outboxRows(plan.messages)),
      ]),
    );
    if (rows[0].reported === 1) {
      announceReports(pool, groups, [row]);
      return answered(taskStatus(row));
    }
    if (attempt >= MAX_REPORT_ATTEMPTS) throw keptChanging(taskId, runId);
  }
}

/** One item of a batch of reports (the reportResolutions endpoint). */
export interface Resolution {
  taskId: string;
  runId: number;
  outcome: Outcome;
  /** for `exception` only: reportException's reason */
  reason?: (typeof EXCEPTION_REASONS)[number];
}

/** A batch item's answer: the task's status as the single report answers it, or the error it would refuse with. */
export type ResolutionResult =
  | { taskId: string; runId: number; status: TaskStatus }
  | { taskId: string; runId: number; error: { code: ErrorCode; message: string } };

/**
 * Resolves many runs as that many single reports in the batch's order would (resolveRun): in one statement with no
 * read when the batch's tasks are distinct and none retries (RESOLVE_MANY_SQL), and for whatever that leaves, with one
 * read and one compare-and-set statement for the batch. A task named more than once is changed in memory item after
 * item and written once; the answers of its items after its first change stand only if that write does. A
 * task that changed since it was read (or a deadlock with another writer, which rolls the statement back) is
 * read again for its items alone. Per-item refusals (404, 409) are answers, not errors.
 */
export async function resolveRuns(pool: pg.Pool, config: Config, groups: Pick<GroupAnnouncer, 'note'>, resolutions: Resolution[]): Promise<ResolutionResult[]> {
  const results: (ResolutionResult | undefined)[] = resolutions.map(() => undefined);
  // A batch RESOLVE_MANY_SQL fits whole (distinct tasks, no retry) is written by it in one statement first. The
  // items it does not write are those that write nothing the other way either (repeats, 404, 409), so the messages
  // keep the batch's order. Any other batch goes the other way whole.
  if (resolutions.length > 0 && new Set(resolutions.map((r) => r.taskId)).size === resolutions.length && resolutions.every(resolvesInOne)) {
    const written = await resolveRunning(pool, resolutions);
    if (written.size > 0) announceReports(pool, groups, [...written.values()]);
    for (const [i, r] of resolutions.entries()) {
      const row = written.get(r.taskId);
      if (row) results[i] = { taskId: r.taskId, runId: r.runId, status: taskStatus(row) };
    }
  }
  for (let attempt = 1; ; attempt++) {
    const open = resolutions.flatMap((_, i) => (results[i] ? [] : [i]));
    if (open.length === 0) return results as ResolutionResult[];
    if (attempt > MAX_REPORT_ATTEMPTS) {
      for (const i of open) results[i] = answerError(resolutions[i], keptChanging(resolutions[i].taskId, resolutions[i].runId));
      return results as ResolutionResult[];
    }
    const now = new Date();
    const rows = new Map((await loadTasks(pool, [...new Set(open.map((i) => resolutions[i].taskId))])).map((r) => [r.task_id, r]));
    /** taskId → the runs as read (the compare-and-set's condition) and the items whose answers need the write */
    const writes = new Map<string, { readRuns: Run[]; row: TaskRow; items: number[] }>();
    const messages: OutboxMessage[] = [];
    const messageTasks: string[] = [];
    for (const i of open) {
      const { taskId, runId, outcome, reason } = resolutions[i];
      const write = writes.get(taskId);
      let plan: ReportPlan;
      try {
        plan = planReport(config, rows.get(taskId), taskId, runId, outcome, reason, now);
      } catch (err) {
        if (!(err instanceof TgsError)) throw err;
        results[i] = answerError(resolutions[i], err);
        write?.items.push(i);
        continue;
      }
      results[i] = { taskId, runId, status: plan.write ? taskStatus(plan.row) : plan.status };
      if (write) write.items.push(i);
      else if (plan.write) writes.set(taskId, { readRuns: plan.readRuns, row: plan.row, items: [i] });
      if (!plan.write) continue;
      messages.push(...plan.messages);
      messageTasks.push(...plan.messages.map(() => taskId));
    }
    if (writes.size === 0) continue;
    const taskIds = [...writes.keys()].sort();
    const reported = await writeReports(pool, taskIds.map((id) => writes.get(id) as { readRuns: Run[]; row: TaskRow }), messages, messageTasks);
    for (const [taskId, write] of writes) if (!reported.has(taskId)) for (const i of write.items) results[i] = undefined;
    const written = taskIds.filter((id) => reported.has(id)).map((id) => (writes.get(id) as { row: TaskRow }).row);
    if (written.length > 0) announceReports(pool, groups, written);
  }
}

const answerError = (r: Resolution, err: TgsError): ResolutionResult => ({ taskId: r.taskId, runId: r.runId, error: { code: err.code, message: err.message } });

/** REPORTS_SQL: the taskIds it wrote; none when the statement lost a deadlock (rolled back: nothing written). */
async function writeReports(pool: pg.Pool, writes: { readRuns: Run[]; row: TaskRow }[], messages: OutboxMessage[], messageTasks: string[]): Promise<Set<string>> {
  const rows = writes.map(({ readRuns, row }) => ({
    task_id: row.task_id,
    read_runs: readRuns,
    state: row.state,
    runs: row.runs,
    retries_left: row.retries_left,
    pending_since: pendingSince(row),
  }));
  try {
    const result = await pool.query<{ task_id: string }>(
      prepared(REPORTS_SQL, [JSON.stringify(rows), rows.map((r) => r.task_id), JSON.stringify(outboxRows(messages)), messageTasks]),
    );
    return new Set(result.rows.map((r) => r.task_id));
  } catch (err) {
    if ((err as { code?: string }).code === DEADLOCK_DETECTED) return new Set();
    throw err;
  }
}

/** Postgres' SQLSTATE for a statement chosen to break a lock cycle: its transaction rolled back. */
const DEADLOCK_DETECTED = '40P01';
