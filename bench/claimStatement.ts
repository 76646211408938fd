// Postgres CPU per task of the queue's hot statements, measured on the backends themselves (/proc/<pid>/stat of
// each connection, Linux), with no HTTP in between: a fresh database holding `tasks` pending tasks shaped as the
// bench's fast tasks (support/db.ts insertPendingTasks: statistics analyzed, as autovacuum would have them), drained
// by `claimers` connections claiming `batch` at a time (claimPending, src/queue/claimWork.ts), then each claim's runs resolved as a worker
// would: one reportCompleted each (resolveRun) when `batch` is 1, else one reportResolutions call a claim
// (resolveRuns). Not part of `npm run bench`:
//
//   node --import tsx bench/claimStatement.ts [tasks=8000] [claimers=4] [batch=4]
//
// CLAIM_BENCH_PLANS=1 also prints how often each named statement was planned for its values (custom plans) and how
// often it ran its one generic plan (pg_prepared_statements of one connection).
import type pg from 'pg';
import { createTestDatabase, insertPendingTasks } from '../support/db.js';
import { cpuSince, cpuSnapshot } from './cpu.js';
import { loadConfig } from '../src/config.js';
import { claimPending } from '../src/queue/claimWork.js';
import { resolveRun, resolveRuns } from '../src/queue/resolveTask.js';
import { testIssuer } from '../support/issuer.js';

const tasks = Number(process.argv[2] ?? 8000);
const claimers = Number(process.argv[3] ?? 4);
const batch = Number(process.argv[4] ?? 4);
const config = loadConfig({});
const issuer = testIssuer();
const groups = { note: () => undefined };

/** CPU milliseconds (user + system) the backends have used (bench/cpu.ts, every pid one group). */
const cpuMs = (pids: number[]) => cpuSince(new Map(), cpuSnapshot(new Map(pids.map((pid) => [pid, 'backends']))), 1).total;

async function measure(clients: pg.PoolClient[]) {
  const pids = await Promise.all(clients.map(async (c) => (await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid));
  const claimed: { taskId: string; runId: number }[] = [];
  let before = cpuMs(pids);
  await Promise.all(
    clients.map(async (client, k) => {
      for (;;) {
        const got = await claimPending(client as unknown as pg.Pool, config, issuer, {
          provisionerId: 'tgs-test', workerType: 'claimbench', workerGroup: 'bench', workerId: `w${k}`, count: batch,
        });
        if (got.length === 0) return;
        for (const t of got) claimed.push({ taskId: t.status.taskId, runId: t.runId });
      }
    }),
  );
  const claim = cpuMs(pids) - before;
  before = cpuMs(pids);
  await Promise.all(
    clients.map(async (client, k) => {
      const pool = client as unknown as pg.Pool;
      for (let i = k * batch; i < claimed.length; i += claimers * batch) {
        if (batch === 1) await resolveRun(pool, config, groups, claimed[i].taskId, claimed[i].runId, 'completed');
        else await resolveRuns(pool, config, groups, claimed.slice(i, i + batch).map((c) => ({ ...c, outcome: 'completed' as const })));
      }
    }),
  );
  const report = cpuMs(pids) - before;
  if (process.env.CLAIM_BENCH_PLANS) {
    const { rows } = await clients[0].query(
      `SELECT generic_plans, custom_plans, left(regexp_replace(statement, '\\s+', ' ', 'g'), 90) AS statement FROM pg_prepared_statements`,
    );
    console.table(rows);
  }
  const per = (ms: number) => Math.round((ms / claimed.length) * 1000) / 1000;
  return { tasks: claimed.length, claimers, batch, postgres_cpu_ms_per_task: { claim: per(claim), report: per(report) } };
}

const db = await createTestDatabase();
try {
  await insertPendingTasks(db.pool, tasks, 'claimbench');
  // one connection per claimer, each held throughout, so their backends' CPU can be read
  const clients = await Promise.all(Array.from({ length: claimers }, () => db.pool.connect()));
  try {
    console.log(JSON.stringify(await measure(clients)));
  } finally {
    for (const c of clients) c.release();
  }
} finally {
  await db.drop();
}
