import type pg from 'pg';
import type { BenchStack } from './scenario.js';

/**
 * What a scenario cost in units that do not depend on the machine's speed, per task: Postgres transactions
 * (pg_stat_database's commits and rollbacks of the bench database: every process's, the bench's own status polls
 * included) and rows written (inserted, updated, deleted), messages written for RabbitMQ (outbox and deferred-lane
 * ids taken), and the graph workflow's workflow tasks (from its histories). pg_stat_statements would count statements,
 * but it needs shared_preload_libraries, a server restart the bench does not make.
 */
export interface CountSnapshot {
  xacts: number;
  rowsWritten: number;
  messages: number;
}

export async function countSnapshot(stack: BenchStack): Promise<CountSnapshot> {
  const pool = stack.api.db.pool;
  // the statistics collector publishes a backend's counts when its transaction ends, at most every 1 s (PG 15)
  await pool.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await pool.query<{ xacts: string; rows_written: string; outbox: string; deferred: string }>(
    `SELECT (xact_commit + xact_rollback)::text AS xacts, (tup_inserted + tup_updated + tup_deleted)::text AS rows_written,
            (SELECT last_value FROM outbox_id_seq)::text AS outbox, (SELECT last_value FROM outbox_deferred_id_seq)::text AS deferred
       FROM pg_stat_database WHERE datname = current_database()`,
  );
  return { xacts: Number(rows[0].xacts), rowsWritten: Number(rows[0].rows_written), messages: Number(rows[0].outbox) + Number(rows[0].deferred) };
}

/** Workflow tasks completed by the graph's workflow, over all its runs. */
async function workflowTasks(stack: BenchStack, taskGraphId: string): Promise<number> {
  const workflowId = `task-graph/${taskGraphId}`;
  let n = 0;
  for await (const execution of stack.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    const history = await stack.client.workflow.getHandle(workflowId, execution.runId).fetchHistory();
    for (const event of history.events ?? []) if (event.workflowTaskCompletedEventAttributes) n++;
  }
  return n;
}

const per = (x: number, n: number) => Math.round((x / n) * 100) / 100;

/** The counts per task between two snapshots, and the graph's workflow tasks per task. */
export async function perTask(stack: BenchStack, before: CountSnapshot, tasks: number, taskGraphId?: string) {
  // the last commits' counts reach pg_stat_database within the collector's interval
  await new Promise((r) => setTimeout(r, 1100));
  const after = await countSnapshot(stack);
  return {
    pg_transactions: per(after.xacts - before.xacts, tasks),
    pg_rows_written: per(after.rowsWritten - before.rowsWritten, tasks),
    messages: per(after.messages - before.messages, tasks),
    ...(taskGraphId ? { workflow_tasks: per(await workflowTasks(stack, taskGraphId), tasks) } : {}),
  };
}

/**
 * Transactions and rows written (inserted, updated, deleted) so far in the database `db` is connected to, from
 * pg_stat_database: the counts of the databases the peer and the batched lane's floor make for themselves
 * (bench/scenarios/peer.ts, bench/floor/batchedLane.ts), whose tables countSnapshot's outbox sequences are not.
 */
export async function databaseCounts(db: pg.Client | pg.Pool): Promise<{ xacts: number; rows: number }> {
  await db.query('SELECT pg_stat_clear_snapshot()');
  const { rows } = await db.query<{ xacts: string; rows: string }>(
    `SELECT (xact_commit + xact_rollback)::text AS xacts, (tup_inserted + tup_updated + tup_deleted)::text AS rows
       FROM pg_stat_database WHERE datname = current_database()`,
  );
  return { xacts: Number(rows[0].xacts), rows: Number(rows[0].rows) };
}
