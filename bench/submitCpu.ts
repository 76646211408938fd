// The CPU of one graph submit, split between the intake (this process) and the Postgres backend that writes it:
// a layered graph (layers × 1,000 tasks, fan-in 4, the scale scenario's shape) streamed through the API's JSON
// member reader into createTaskGraph, in a fresh database, no workflow. `node --import tsx bench/submitCpu.ts
// [layers] [rounds]` (default 20, 3); add `--cpu-prof` to node for a profile of the intake. Also prints the WAL the
// submit wrote (pg_current_wal_lsn), which the checkpointer and the WAL writer pay for beyond the backend.
import { readFileSync } from 'node:fs';
import { Readable } from 'node:stream';
import slugid from 'slugid';
import { createTestDatabase } from '../support/db.js';
import { layeredGraph } from '../support/graphs.js';
import { loadConfig } from '../src/config.js';
import { createTaskGraph } from '../src/scheduler/createTaskGraph.js';
import { objectMembers } from '../src/api/jsonObjectStream.js';

const layers = Number(process.argv[2] ?? 20);
const rounds = Number(process.argv[3] ?? 3);
const ticks = (pid: number) => {
  const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
  return (Number(f[11]) + Number(f[12])) * 10;
};
const db = await createTestDatabase();
try {
  const config = loadConfig({ TGS_MAX_GRAPH_NODES: '300000' } as NodeJS.ProcessEnv);
  const backends = async () => (await db.pool.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE datname = current_database()')).rows.map((r) => r.pid);
  for (let round = 0; round < rounds; round++) {
    const { graph } = layeredGraph(layers, 1000, 'submitcpu', 4);
    const bytes = Buffer.from(JSON.stringify(graph));
    const walBefore = (await db.pool.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn')).rows[0].lsn;
    const pids = await backends();
    const pgBefore = new Map(pids.map((p) => [p, ticks(p)]));
    const cpu0 = process.cpuUsage();
    const t0 = performance.now();
    const chunks = [];
    for (let i = 0; i < bytes.length; i += 65536) chunks.push(bytes.subarray(i, i + 65536));
    const created = await createTaskGraph({ config, pool: db.pool }, slugid.nice(), objectMembers(Readable.from(chunks), { expand: ['tasks'], maxValueBytes: 1 << 20 }));
    let n = 0;
    for await (const page of created.tasks) n += page.length;
    const wall = performance.now() - t0;
    const cpu = process.cpuUsage(cpu0);
    let pgMs = 0;
    for (const p of await backends()) pgMs += ticks(p) - (pgBefore.get(p) ?? 0);
    const tasks = layers * 1000;
    const walBytes = Number((await db.pool.query<{ bytes: string }>('SELECT pg_current_wal_lsn() - $1::pg_lsn AS bytes', [walBefore])).rows[0].bytes);
    console.log(JSON.stringify({
      tasks: n, wall_s: +(wall / 1000).toFixed(2), intake_ms_per_task: +((cpu.user + cpu.system) / 1000 / tasks).toFixed(4),
      postgres_ms_per_task: +(pgMs / tasks).toFixed(4), wal_bytes_per_task: Math.round(walBytes / tasks),
    }));
  }
} finally {
  await db.drop();
}
