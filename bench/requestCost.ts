// CPU per API request, by process, one kind of request at a time, through the bench stack (`tgs api`, relay, bridge
// and scheduler worker as processes, as `npm run bench` runs them): where claim + complete's CPU goes, request by
// request. Not part of `npm run bench`:
//
//   node --import tsx bench/requestCost.ts [tasks=4000] [claim=8]
//
// In the order it runs, each from 16 loops one request at a time, each printed as a JSON line of requests a second
// and CPU milliseconds a request (or a task) by process:
// - `ping` (anonymous, no Postgres): the HTTP and fastify floor;
// - `task status, anonymous` and `task status, Hawk (root)`: one primary-key read, without and with authentication;
// - `claimWork` of up to `claim` tasks a call (CPU a task): `tasks` pending tasks made by createTask beforehand;
// - `reportCompleted`, each run once with its own temporary credentials, as the fast worker does;
// - then as many other tasks claimed the same way and reported with the very function reportCompleted calls
//   (resolveRun, the real task-group announcer), from the bench process: the report with no HTTP, Hawk or API.
// Everything runs twice and the second pass is printed (the first warms the processes up).
import slugid from 'slugid';
import { startBenchStack } from './stack.js';
import { autovacuumForRun } from './autovacuum.js';
import { cpuSince, cpuSnapshot } from './cpu.js';
import { ApiClient, type TgsCredentials } from '../src/client/http.js';
import { createPool } from '../src/db/pool.js';
import { resolveRun } from '../src/queue/resolveTask.js';
import { GroupAnnouncer } from '../src/queue/groupAnnouncer.js';
import { fastTask } from '../support/graphs.js';
import type { BenchStack } from './scenario.js';

const tasks = Number(process.argv[2] ?? 4000);
const claimCount = Number(process.argv[3] ?? 8);
const LOOPS = 16;

interface Claimed {
  status: { taskId: string };
  runId: number;
  credentials: TgsCredentials;
}

/** Runs `call` `count` times from LOOPS loops: requests a second and CPU ms a request. */
async function timed(stack: BenchStack, count: number, call: (i: number) => Promise<unknown>) {
  const before = cpuSnapshot(stack.processNames());
  const t0 = performance.now();
  let next = 0;
  await Promise.all(
    Array.from({ length: LOOPS }, async () => {
      while (next < count) await call(next++);
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  return { per_s: Math.round(count / seconds), cpu_ms: cpuSince(before, cpuSnapshot(stack.processNames()), count) };
}

async function createPending(stack: BenchStack, workerType: string): Promise<void> {
  const ids = Array.from({ length: tasks }, () => slugid.nice());
  for (let i = 0; i < ids.length; i += 50) {
    await Promise.all(ids.slice(i, i + 50).map((id) => stack.root.request('queue', 'PUT', `/task/${id}`, { ...fastTask(id), workerType })));
  }
}

/**
 * Claims every pending task of `workerType` through claimWork from LOOPS loops, up to claimCount a call, never asking
 * for more than is left unclaimed (a call asking for more would long-poll for it).
 */
async function claimAll(stack: BenchStack, workerType: string) {
  const claimed: Claimed[] = [];
  let asked = 0;
  let calls = 0;
  const before = cpuSnapshot(stack.processNames());
  const t0 = performance.now();
  await Promise.all(
    Array.from({ length: LOOPS }, async (_, k) => {
      while (claimed.length < tasks) {
        const count = Math.min(claimCount, tasks - asked);
        if (count === 0) {
          await new Promise((r) => setTimeout(r, 5));
          continue;
        }
        asked += count;
        const res = await stack.root.request<{ tasks: Claimed[] }>('queue', 'POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'cost', workerId: `w${k}`, tasks: count });
        calls++;
        asked -= count - res.tasks.length;
        claimed.push(...res.tasks);
      }
    }),
  );
  const seconds = (performance.now() - t0) / 1000;
  const figures = { per_s: Math.round(claimed.length / seconds), cpu_ms: cpuSince(before, cpuSnapshot(stack.processNames()), claimed.length) };
  return { claimed, figures: { ...figures, tasks_a_call: Math.round((claimed.length / calls) * 10) / 10 } };
}

async function pass(stack: BenchStack, round: number): Promise<Record<string, unknown>> {
  const anonymous = new ApiClient(stack.api.rootUrl);
  const statusOf = slugid.nice();
  await stack.root.request('queue', 'PUT', `/task/${statusOf}`, { ...fastTask('status'), workerType: `cost-status-${round}` });
  const requests = tasks;
  const out: Record<string, unknown> = {
    ping: await timed(stack, requests, () => anonymous.request('queue', 'GET', '/ping')),
    'task status, anonymous': await timed(stack, requests, () => anonymous.request('queue', 'GET', `/task/${statusOf}/status`)),
    'task status, Hawk (root)': await timed(stack, requests, () => stack.root.request('queue', 'GET', `/task/${statusOf}/status`)),
  };
  const viaApi = `cost-api-${round}`;
  await createPending(stack, viaApi);
  const api = await claimAll(stack, viaApi);
  out[`claimWork, up to ${claimCount} a call (CPU a task)`] = api.figures;
  out['reportCompleted'] = await timed(stack, api.claimed.length, (i) => {
    const t = api.claimed[i];
    return stack.root.request('queue', 'POST', `/task/${t.status.taskId}/runs/${t.runId}/completed`, undefined, t.credentials);
  });
  const direct = `cost-direct-${round}`;
  await createPending(stack, direct);
  const bare = await claimAll(stack, direct);
  const pool = createPool(stack.config.databaseUrl, LOOPS);
  const groups = new GroupAnnouncer(pool, stack.config);
  try {
    out['resolveRun from the bench process (no HTTP, Hawk or API)'] = await timed(stack, bare.claimed.length, (i) =>
      resolveRun(pool, stack.config, groups, bare.claimed[i].status.taskId, bare.claimed[i].runId, 'completed'),
    );
  } finally {
    await groups.stop();
    await pool.end();
  }
  return out;
}

const stack = await startBenchStack({ separateProcesses: true, log: (line) => console.error(`[requestCost] ${line}`) });
const autovacuum = await autovacuumForRun(stack.api.db.pool, (line) => console.error(`[requestCost] ${line}`), false);
try {
  await pass(stack, 0);
  for (const [kind, figures] of Object.entries(await pass(stack, 1))) console.log(JSON.stringify({ kind, ...(figures as object) }));
} finally {
  await autovacuum.restore();
  await stack.stop();
}
