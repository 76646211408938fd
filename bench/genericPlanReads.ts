/**
 * `node --import tsx bench/genericPlanReads.ts [bare|anyOf] [calls]`: the hop's two reads of one task, the bridge's
 * check of the stored run (src/queue/latestRuns.ts) and the dispatch's readiness read (src/queue/readiness.ts), made
 * `calls` times each (default 5,000) on one connection against 10,000 analyzed pending tasks: wall milliseconds and
 * the Postgres backend's CPU milliseconds per pair of reads. `anyOf` runs them as tgs does; `bare` with the array
 * written `= ANY($1)`, as before they went through anyOf (src/db/pool.ts), which Postgres planned again at every call.
 * PLAN_DB_URL: a database already set up by an earlier run (it prints the one it creates, and leaves it: drop it
 * with `DROP DATABASE … WITH (FORCE)`), so that runs alternated by a timer measure the reads and not the set-up.
 */
import { readFileSync } from 'node:fs';
import type pg from 'pg';
import { anyOf, createPool, prepared, type Queryable } from '../src/db/pool.js';
import { latestRuns } from '../src/queue/latestRuns.js';
import { readyTasks } from '../src/queue/readiness.js';
import { createTestDatabase, insertPendingTasks } from '../support/db.js';
import { benchPostgresUrl } from './pgSocket.js';

/**
 * The statements' texts as tgs sends them, caught on their way, and the same texts with the array written bare
 * (`= ANY($1)`, their form before they went through anyOf): the only difference between the two variants.
 */
async function statementText(call: (db: Queryable) => Promise<unknown>): Promise<string> {
  let text = '';
  await call({ query: async (config: pg.QueryConfig) => ((text = config.text), { rows: [] }) } as unknown as Queryable);
  return text;
}
const bare = (text: string) => text.replace(anyOf('$1', 'text'), 'ANY($1)');
const [latestRunsText, readyText] = [await statementText((db) => latestRuns(db, ['x'])), await statementText((db) => readyTasks(db, ['x']))];
if (bare(latestRunsText) === latestRunsText || bare(readyText) === readyText) throw new Error('the reads no longer go through anyOf: nothing to compare');

const variant = process.argv[2] ?? 'anyOf';
const calls = Number(process.argv[3] ?? 5000);
if (variant !== 'bare' && variant !== 'anyOf') throw new Error('usage: genericPlanReads.ts [bare|anyOf] [calls]');

let url = process.env.PLAN_DB_URL;
if (!url) {
  const db = await createTestDatabase({ postgresUrl: benchPostgresUrl() });
  await insertPendingTasks(db.pool, 10_000, 'plans');
  await db.pool.end();
  url = db.url;
  console.log(`PLAN_DB_URL=${url}`);
}
const pool = createPool(url, 1);
const client = await pool.connect();
const backendPid = (await client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0].pid;
const backendMs = () => {
  const fields = readFileSync(`/proc/${backendPid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(fields[11]) + Number(fields[12])) * 10;
};
const ids = (await client.query<{ task_id: string }>('SELECT task_id FROM tasks ORDER BY random() LIMIT $1', [calls])).rows.map((r) => r.task_id);
const db = client as unknown as Parameters<typeof latestRuns>[0];
const read = variant === 'anyOf'
  ? async (id: string) => {
    await latestRuns(db, [id]);
    await readyTasks(db, [id]);
  }
  : async (id: string) => {
    await client.query(prepared(bare(latestRunsText), [[id]]));
    await client.query(prepared(bare(readyText), [[id]]));
  };
for (const id of ids.slice(0, 50)) await read(id); // past Postgres' first five calls of each, which are always planned for their values
const cpu0 = backendMs();
const t0 = performance.now();
for (const id of ids) await read(id);
const wallMs = (performance.now() - t0) / ids.length;
const cpuMs = (backendMs() - cpu0) / ids.length;
const { rows } = await client.query<{ generic_plans: number; custom_plans: number }>("SELECT generic_plans, custom_plans FROM pg_prepared_statements WHERE name LIKE 'tgs_%'");
console.log(JSON.stringify({ variant, calls: ids.length, wall_ms_per_pair: Math.round(wallMs * 1000) / 1000, backend_cpu_ms_per_pair: Math.round(cpuMs * 1000) / 1000, plans: rows }));
client.release();
await pool.end();
