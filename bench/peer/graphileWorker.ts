/**
 * The peer, graphile-worker, run in a process of its own so that its CPU is counted apart from the bench's and
 * Postgres' (bench/scenarios/peer.ts forks this file and talks to it over IPC). Its database is the scenario's own
 * (PEER_DATABASE_URL), on the same Postgres server as tgs's, with the server's settings (synchronous_commit on).
 *
 * Each run: the parent sends `{ type: 'prepare', mode, jobs, concurrency }`; this process empties the jobs table,
 * sets the mode's triggers, adds `jobs` no-op jobs (graphile-worker's addJobs, 1,000 a call), vacuums and analyzes,
 * and answers `ready`. The parent takes its CPU snapshots and sends `go`; the worker pool starts and drains the jobs,
 * and the answer `done` carries the seconds from the start to the last job's row gone from the jobs table (its
 * completion written, batched or not). The process stays up between runs, so that the peer runs warm as tgs's
 * processes do (bench/settle.ts).
 */
import pg from 'pg';
import { Logger, makeWorkerUtils, run, runMigrations, type Runner } from 'graphile-worker';
import { PEER_MODES, type PeerMode, type PeerReply, type PeerRequest } from './protocol.js';

const url = process.env.PEER_DATABASE_URL;
if (!url || !process.send) throw new Error('bench/peer/graphileWorker.ts is forked by bench/scenarios/peer.ts (PEER_DATABASE_URL, an IPC channel)');
const send = (reply: PeerReply) => process.send?.(reply);

/**
 * Warnings and errors only: graphile-worker logs a line a job at info ("Completed task …"), which would put a
 * console write a job on the peer's side. tgs's API writes its two log lines a task (docs/benchmarks.md § The peer), so
 * this takes the peer at its cheapest.
 */
const quietLogger = new Logger(() => (level, message) => {
  if (level === 'error' || level === 'warning') process.stderr.write(`[graphile-worker ${level}] ${message}\n`);
});

/**
 * Equal work (the `-equal` modes): what tgs writes a task beside its claim and report. tgs appends a message row to its
 * outbox at each state change (pending, running, completed) and keeps the task's row when it resolves; here a trigger
 * appends an event row at each change of a job's row (added, locked, deleted on completion) and the deleted job is kept
 * in a table of its own. Both row-level, as tgs's writes are: a batched completion of 500 jobs writes 500 events.
 */
const TABLES_SQL = `
  CREATE SCHEMA IF NOT EXISTS peer_bench;
  CREATE TABLE IF NOT EXISTS peer_bench.events (id bigserial PRIMARY KEY, job_id bigint NOT NULL, change text NOT NULL, at timestamptz NOT NULL DEFAULT now(), payload json);
  CREATE TABLE IF NOT EXISTS peer_bench.jobs_done (LIKE graphile_worker._private_jobs);
  CREATE OR REPLACE FUNCTION peer_bench.job_changed() RETURNS trigger LANGUAGE plpgsql AS $$
  BEGIN
    IF TG_OP = 'DELETE' THEN
      INSERT INTO peer_bench.jobs_done SELECT OLD.*;
      INSERT INTO peer_bench.events (job_id, change, payload) VALUES (OLD.id, 'completed', OLD.payload);
      RETURN OLD;
    END IF;
    INSERT INTO peer_bench.events (job_id, change, payload) VALUES (NEW.id, CASE WHEN TG_OP = 'INSERT' THEN 'added' ELSE 'locked' END, NEW.payload);
    RETURN NEW;
  END $$;
  TRUNCATE peer_bench.events, peer_bench.jobs_done;
  DROP TRIGGER IF EXISTS peer_bench_job_changed ON graphile_worker._private_jobs;`;
const EQUAL_WORK_SQL = `
  CREATE TRIGGER peer_bench_job_changed AFTER INSERT OR UPDATE OR DELETE ON graphile_worker._private_jobs
    FOR EACH ROW EXECUTE FUNCTION peer_bench.job_changed();`;

/**
 * The mode's options. Default: graphile-worker as installed (one get and one complete statement a job). Batched: its
 * documented fast mode, a local queue of 500 fetched in one statement and completions batched as they come
 * (`completeJobBatchDelay: 0`). Both with a connection for each of the 16 workers plus one for its LISTEN, so no
 * worker waits for a connection (its default pool is 10).
 */
function workerPreset(mode: PeerMode, concurrency: number): GraphileConfig.Preset {
  const batched = mode === 'batched' || mode === 'batched-equal';
  return {
    worker: {
      connectionString: url,
      concurrentJobs: concurrency,
      maxPoolSize: concurrency + 1,
      logger: quietLogger,
      ...(batched ? { localQueue: { size: 500 }, completeJobBatchDelay: 0, failJobBatchDelay: 0 } : {}),
    },
  };
}

const pool = new pg.Pool({ connectionString: url, max: 2 });
let prepared: { mode: PeerMode; jobs: number; concurrency: number } | undefined;

async function prepare(mode: PeerMode, jobs: number, concurrency: number) {
  if (!PEER_MODES.includes(mode)) throw new Error(`unknown peer mode ${mode} (one of ${PEER_MODES.join(', ')})`);
  await runMigrations({ connectionString: url, logger: quietLogger });
  await pool.query('TRUNCATE graphile_worker._private_jobs');
  await pool.query(TABLES_SQL);
  if (mode.endsWith('-equal')) await pool.query(EQUAL_WORK_SQL);
  const utils = await makeWorkerUtils({ connectionString: url, logger: quietLogger });
  try {
    for (let i = 0; i < jobs; i += 1000) {
      await utils.addJobs(Array.from({ length: Math.min(1000, jobs - i) }, (_, k) => ({ identifier: 'noop', payload: { n: i + k } })));
    }
  } finally {
    await utils.release();
  }
  // as bench/settle.ts does for tgs before each scenario
  await pool.query('VACUUM (ANALYZE) graphile_worker._private_jobs');
  prepared = { mode, jobs, concurrency };
}

/** Runs the pool until every job's row is gone (completed: graphile-worker deletes a job when it completes). */
async function drain(): Promise<{ seconds: number; executed: number }> {
  if (!prepared) throw new Error('go before prepare');
  const { mode, jobs, concurrency } = prepared;
  prepared = undefined;
  let executed = 0;
  let allExecuted: () => void = () => undefined;
  const executedAll = new Promise<void>((resolve) => (allExecuted = resolve));
  const started = performance.now();
  const runner: Runner = await run({
    preset: workerPreset(mode, concurrency),
    noHandleSignals: true,
    taskList: {
      noop: async () => {
        if (++executed === jobs) allExecuted();
      },
    },
  });
  await executedAll;
  // the completions of the last jobs may still be on their way (batched, or not awaited by the worker): the end is
  // when the table is empty, looked at every 2 ms from here on only
  while ((await pool.query('SELECT EXISTS (SELECT 1 FROM graphile_worker._private_jobs) AS left')).rows[0].left) {
    await new Promise((resolve) => setTimeout(resolve, 2));
  }
  const seconds = (performance.now() - started) / 1000;
  await runner.stop();
  return { seconds, executed };
}

process.on('message', (request: PeerRequest) => {
  const answer = async (): Promise<PeerReply> => {
    if (request.type === 'prepare') {
      await prepare(request.mode, request.jobs, request.concurrency);
      return { type: 'ready' };
    }
    return { type: 'done', ...(await drain()) };
  };
  if (request.type === 'exit') {
    void pool.end().finally(() => process.exit(0));
    return;
  }
  answer().then(send, (err: unknown) => send({ type: 'error', message: err instanceof Error ? (err.stack ?? err.message) : String(err) }));
});
send({ type: 'started' });
