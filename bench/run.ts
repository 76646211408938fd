/**
 * `npm run bench [-- --quick] [-- --only hop,throughput,scale,queue,ui]`: tgs against its floors, measured in
 * one run on this machine. Writes bench/results/latest.json and a dated copy, and prints a table.
 */
// first: it picks the Postgres connection before the test helpers read TGS_TEST_PG
import './pgSocket.js';
import { cpus, totalmem } from 'node:os';
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import slugid from 'slugid';
import { NativeConnection, Worker, bundleWorkflowCode } from '@temporalio/worker';
import { startStack, eventually, type Stack } from '../test/helpers/stack.js';
import { startFastWorker } from '../test/helpers/fastWorker.js';
import { fastTask, graphOf } from '../test/helpers/graphs.js';
import { findTemporalCli, freePort } from '../src/temporal/devServer.js';
import { ApiClient } from '../src/client/http.js';
import { bundlerOptions } from '../src/temporal/workflowBundle.js';
import { createFloorActivities } from './floor/activities.js';
import { percentile } from './stats.js';
import { runQueueBench } from './queue.js';
import { renderMarkdown } from './report.js';
import { runUiBench } from './ui.js';
import { cpuSince, cpuSnapshot } from './cpu.js';

const args = process.argv.slice(2);
const quick = args.includes('--quick');
const onlyArg = args.find((a) => a.startsWith('--only='))?.slice(7);
const only = new Set((onlyArg ?? 'hop,throughput,scale,queue,ui').split(','));
const sizes = quick
  ? { chain: 20, floorHops: 20, throughput: 500, layers: 10, width: 100, fanIn: 3, queueTasks: 300 }
  : { chain: 200, floorHops: 200, throughput: 10_000, layers: 100, width: 1000, fanIn: 4, queueTasks: 5000 };
// --layers=N --width=M override the scale scenario's size (e.g. a 20,000-task run when 100,000 takes too long)
for (const key of ['layers', 'width'] as const) {
  const value = args.find((a) => a.startsWith(`--${key}=`))?.split('=')[1];
  if (value) sizes[key] = Number(value);
}
// By default the API, the bridge and the scheduler worker run as their own `tgs` processes, as in a
// deployment: each gets its own peak RSS, and they use both cores. --single-process keeps them in one.
const separateProcesses = !args.includes('--single-process');
const log = (line: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);

function rssMb(pid: number): number {
  try {
    const m = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Math.round(Number(m[1]) / 1024) : NaN;
  } catch {
    return NaN;
  }
}

async function machine(stack: Stack) {
  const { rows } = await stack.api.db.pool.query<{ server_version: string }>('SHOW server_version');
  let rabbitmq = 'unknown';
  try {
    rabbitmq = /RabbitMQ version: (\S+)/.exec(execFileSync('rabbitmqctl', ['status'], { encoding: 'utf8' }))?.[1] ?? rabbitmq;
  } catch {
    // not fatal
  }
  return {
    cpus: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    temporal: execFileSync(findTemporalCli() as string, ['--version'], { encoding: 'utf8' }).trim(),
    postgres: rows[0].server_version,
    postgresVia: stack.config.databaseUrl.includes('%2F') ? 'unix socket' : 'tcp',
    rabbitmq,
  };
}

/** Per-hop time: reportCompleted answered for A → B claimed, over a chain of tasks. */
async function hopScenario(stack: Stack) {
  const claimedAt = new Map<string, number>();
  const reportedAt = new Map<string, number>();
  // wall-clock copies, to split each hop at the moment Temporal recorded the resolutions signal
  const claimedWall = new Map<string, number>();
  const reportedWall = new Map<string, number>();
  const worker = startFastWorker({
    rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'chain', concurrency: 2,
    onClaim: (t) => {
      claimedAt.set(t.taskId, performance.now());
      claimedWall.set(t.taskId, Date.now());
    },
    onReport: (t) => {
      reportedAt.set(t.taskId, performance.now());
      reportedWall.set(t.taskId, Date.now());
    },
  });
  const labels = Array.from({ length: sizes.chain }, (_, i) => `c${i}`);
  const graph = graphOf(Object.fromEntries(labels.map((l, i) => [l, { requires: i ? [labels[i - 1]] : [] }])), 'bench');
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = 'chain';
  const id = slugid.nice();
  const res = await stack.root.request('scheduler', 'PUT', `/task-graph/${id}`, graph);
  const ids = new Map<string, string>(res.tasks.map((t: { label: string; taskId: string }) => [t.label, t.taskId]));
  await eventually(async () => (await stack.root.request('scheduler', 'GET', `/task-graph/${id}/status`)).status.state === 'finished', 'chain finished', 600_000);
  await worker.stop();
  const hops: number[] = [];
  for (let i = 1; i < labels.length; i++) {
    hops.push((claimedAt.get(ids.get(labels[i]) as string) as number) - (reportedAt.get(ids.get(labels[i - 1]) as string) as number));
  }
  // Where a hop's time goes: report → signal recorded (outbox, relay, RabbitMQ, bridge) and
  // signal → next claimed (workflow task, dispatch local activity, NOTIFY, claim).
  const signaledAt = await resolutionSignalTimes(stack, id);
  const toSignal: number[] = [];
  const fromSignal: number[] = [];
  for (let i = 1; i < labels.length; i++) {
    const a = ids.get(labels[i - 1]) as string;
    const b = ids.get(labels[i]) as string;
    const signal = signaledAt.get(a);
    if (signal === undefined) continue;
    toSignal.push(signal - (reportedWall.get(a) as number));
    fromSignal.push((claimedWall.get(b) as number) - signal);
  }
  return { hops, toSignal, fromSignal };
}

/** When Temporal recorded each task's first resolutions signal, from the graph's workflow histories. */
async function resolutionSignalTimes(stack: Stack, taskGraphId: string): Promise<Map<string, number>> {
  const times = new Map<string, number>();
  const workflowId = `task-graph/${taskGraphId}`;
  for await (const execution of stack.client.workflow.list({ query: `WorkflowId = '${workflowId}'` })) {
    const history = await stack.client.workflow.getHandle(workflowId, execution.runId).fetchHistory();
    for (const event of history.events ?? []) {
      const attrs = event.workflowExecutionSignaledEventAttributes;
      if (!attrs || attrs.signalName !== 'resolutions' || !event.eventTime) continue;
      const at = Number(event.eventTime.seconds) * 1000 + Math.floor((event.eventTime.nanos ?? 0) / 1e6);
      const payload = attrs.input?.payloads?.[0]?.data;
      if (!payload) continue;
      for (const r of JSON.parse(Buffer.from(payload).toString()) as { taskId: string }[]) {
        if (!times.has(r.taskId)) times.set(r.taskId, at);
      }
    }
  }
  return times;
}

/** The same hop done bare: signal → workflow → one activity → one Postgres UPDATE. */
async function floorScenario(stack: Stack, mode: 'regular' | 'local') {
  const pool = stack.api.db.pool;
  await pool.query('CREATE TABLE IF NOT EXISTS bench_floor (id int PRIMARY KEY, n int)');
  await pool.query('INSERT INTO bench_floor VALUES (1, 0) ON CONFLICT DO NOTHING');
  const waiters = new Map<number, () => void>();
  const connection = await NativeConnection.connect({ address: stack.temporal.address });
  const worker = await Worker.create({
    connection,
    taskQueue: `bench-floor-${mode}`,
    workflowBundle: await bundleWorkflowCode({ workflowsPath: new URL('./floor/workflows.ts', import.meta.url).pathname, webpackConfigHook: bundlerOptions?.webpackConfigHook }),
    activities: createFloorActivities(pool, (n) => waiters.get(n)?.()),
  });
  const running = worker.run();
  const handle = await stack.client.workflow.start('floorWorkflow', { taskQueue: `bench-floor-${mode}`, workflowId: `floor-${mode}-${slugid.nice()}`, args: [mode, sizes.floorHops] });
  const times: number[] = [];
  for (let n = 1; n <= sizes.floorHops; n++) {
    const done = new Promise<void>((resolve) => waiters.set(n, resolve));
    const t0 = performance.now();
    await handle.signal('hop', n);
    await done;
    times.push(performance.now() - t0);
  }
  await handle.result();
  worker.shutdown();
  await running;
  await connection.close();
  return times;
}

/** The queue's own floor: scheduleTask → claimed, for a task that was unscheduled. */
async function queueFloor(stack: Stack) {
  const claimedAt = new Map<string, number>();
  const worker = startFastWorker({
    rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType: 'qfloor', concurrency: 2,
    onClaim: (t) => claimedAt.set(t.taskId, performance.now()),
  });
  // A blocker nobody claims keeps the measured tasks unscheduled until we schedule them by hand.
  const blocker = slugid.nice();
  await stack.root.request('queue', 'PUT', `/task/${blocker}`, { ...fastTask('blocker'), workerType: 'nobody' });
  const times: number[] = [];
  for (let i = 0; i < Math.min(sizes.floorHops, 100); i++) {
    const id = slugid.nice();
    await stack.root.request('queue', 'PUT', `/task/${id}`, { ...fastTask(`q${i}`), workerType: 'qfloor', dependencies: [blocker] });
    const t0 = performance.now();
    await stack.root.request('queue', 'POST', `/task/${id}/schedule`);
    await eventually(async () => claimedAt.has(id), 'claimed', 10_000);
    times.push((claimedAt.get(id) as number) - t0);
  }
  await worker.stop();
  return times;
}

async function graphRun(stack: Stack, graph: ReturnType<typeof graphOf>, concurrency: number, workerType: string) {
  for (const node of Object.values(graph.tasks)) (node.task as { workerType: string }).workerType = workerType;
  const reportTimes: number[] = [];
  const worker = startFastWorker({
    rootUrl: stack.api.rootUrl, credentials: stack.api.root, provisionerId: 'tgs-test', workerType, concurrency, batch: 4,
    onReport: () => reportTimes.push(performance.now()),
  });
  const id = slugid.nice();
  const t0 = performance.now();
  await stack.root.request('scheduler', 'PUT', `/task-graph/${id}`, graph);
  const submitted = performance.now();
  let lastLog = 0;
  await eventually(async () => {
    const state = (await stack.root.request('scheduler', 'GET', `/task-graph/${id}/status`)).status.state;
    if (performance.now() - lastLog > 10_000) {
      lastLog = performance.now();
      log(`  ${id}: ${state}, ${worker.reported.length} tasks reported`);
    }
    return state === 'finished';
  }, `graph ${id} finished`, 3_600_000);
  const finished = performance.now();
  await worker.stop();
  const at = (t: number | undefined) => (t === undefined ? NaN : Math.round(t - t0) / 1000);
  // where the time goes: submit, then the first task's report, the bulk of the reports, the last one, finished
  const phases = {
    submitted_s: at(submitted), first_report_s: at(reportTimes[0]), median_report_s: at(reportTimes[Math.floor(reportTimes.length / 2)]),
    second_last_report_s: at(reportTimes.at(-2)), last_report_s: at(reportTimes.at(-1)), finished_s: at(finished),
  };
  return { id, submitS: (submitted - t0) / 1000, finishS: (finished - t0) / 1000, phases };
}

async function historyStats(stack: Stack, taskGraphId: string) {
  let runs = 0;
  let maxEvents = 0;
  let maxBytes = 0;
  for await (const execution of stack.client.workflow.list({ query: `WorkflowId = 'task-graph/${taskGraphId}'` })) {
    runs++;
    maxEvents = Math.max(maxEvents, execution.historyLength);
    maxBytes = Math.max(maxBytes, execution.historySize ?? 0);
  }
  return { continueAsNew: Math.max(0, runs - 1), maxEvents, maxBytes };
}

interface TgsProcess {
  name: string;
  child: ChildProcess;
}

function spawnTgs(stack: Stack, command: string, env: Record<string, string> = {}): TgsProcess {
  const c = stack.config;
  const profile = process.env.TGS_BENCH_PROFILE ? ['--cpu-prof', '--cpu-prof-dir', process.env.TGS_BENCH_PROFILE] : [];
  const child = spawn(process.execPath, [...profile, '--import', 'tsx', 'src/cli/entry.ts', command], {
    env: {
      ...process.env,
      DATABASE_URL: c.databaseUrl,
      AMQP_URL: c.amqpUrl,
      TEMPORAL_ADDRESS: c.temporalAddress,
      TGS_TASK_QUEUE: c.temporalTaskQueue,
      TGS_EXCHANGE_PREFIX: c.exchangePrefix,
      TGS_ROOT_ACCESS_TOKEN: stack.api.root.accessToken,
      TGS_CLAIM_TIMEOUT: String(c.claimTimeoutSeconds),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let tail = '';
  const keep = (d: Buffer) => {
    tail = (tail + d.toString()).slice(-2000);
    if (process.env.TGS_BENCH_VERBOSE) process.stderr.write(`[${command}] ${d}`);
  };
  child.stdout?.on('data', keep);
  child.stderr?.on('data', keep);
  child.once('exit', (code, signal) => {
    if (code !== 0 && signal !== 'SIGTERM') log(`${command} exited (${code ?? signal}): ${tail}`);
  });
  return { name: command, child };
}

async function stopProcesses(processes: TgsProcess[]) {
  await Promise.all(processes.map(({ child }) => new Promise((resolve) => {
    if (child.exitCode !== null || child.signalCode) return resolve(null);
    child.once('exit', resolve);
    child.kill('SIGTERM');
  })));
}

/** The API, bridge and scheduler worker as `tgs` processes; returns the API's rootUrl. */
async function startProcesses(stack: Stack, processes: TgsProcess[]): Promise<string> {
  const port = await freePort();
  const rootUrl = `http://127.0.0.1:${port}`;
  processes.push(spawnTgs(stack, 'api', { PORT: String(port), HOST: '127.0.0.1', TGS_ROOT_URL: rootUrl }));
  processes.push(spawnTgs(stack, 'bridge'));
  processes.push(spawnTgs(stack, 'scheduler-worker'));
  await eventually(async () => (await fetch(`${rootUrl}/api/queue/v1/ping`)).ok, 'tgs api process answering', 60_000);
  return rootUrl;
}

/** pid → name for the CPU accounting of bench/cpu.ts (postgres, rabbitmq and temporal are found by command line). */
function processNames(processes: TgsProcess[]): Map<number, string> {
  const names = new Map<number, string>(processes.map((p) => [p.child.pid as number, `tgs ${p.name}`]));
  names.set(process.pid, separateProcesses ? 'bench (fast worker, relay)' : 'tgs (all) + bench');
  return names;
}

async function main() {
  log(`starting the stack (quick=${quick}, ${separateProcesses ? 'api, bridge and scheduler-worker as processes' : 'single process'})`);
  const stack = await startStack({
    // the stack's own (idle) API sweeps at the production interval, not the tests' 200 ms
    configOverrides: { claimTimeoutSeconds: 600, sweepIntervalMs: 5000 },
    inProcessBridge: !separateProcesses,
    inProcessWorker: !separateProcesses,
  });
  const processes: TgsProcess[] = [];
  if (separateProcesses) {
    const rootUrl = await startProcesses(stack, processes);
    // Everything below talks to the API process; the stack's own API stays idle.
    stack.api.rootUrl = rootUrl;
    stack.root = new ApiClient(rootUrl, stack.api.root);
  }
  const results: Record<string, unknown> = {
    machine: await machine(stack),
    quick,
    processes: separateProcesses ? 'api, bridge, scheduler-worker as tgs processes; relay and the fast worker in the bench process' : 'single',
    date: new Date().toISOString(),
  };
  try {
    if (only.has('hop')) {
      log(`hop: chain of ${sizes.chain}`);
      const { hops, toSignal, fromSignal } = await hopScenario(stack);
      log('hop: floor (bare signal → activity → UPDATE)');
      const floor = await floorScenario(stack, 'regular');
      const floorLocal = await floorScenario(stack, 'local');
      log('hop: queue floor (scheduleTask → claimed)');
      const qf = await queueFloor(stack);
      results.hop = {
        p50_ms: percentile(hops, 50), p95_ms: percentile(hops, 95), p99_ms: percentile(hops, 99),
        floor_p50_ms: percentile(floor, 50), floor_p99_ms: percentile(floor, 99),
        floor_local_p50_ms: percentile(floorLocal, 50), floor_local_p99_ms: percentile(floorLocal, 99),
        queue_floor_p50_ms: percentile(qf, 50), queue_floor_p99_ms: percentile(qf, 99),
        // the hop split at the resolutions signal (wall clock; same machine)
        report_to_signal_p50_ms: percentile(toSignal, 50), signal_to_claim_p50_ms: percentile(fromSignal, 50),
      };
    }
    if (only.has('throughput')) {
      const n = sizes.throughput;
      log(`throughput: ${n}-task graph (1 → ${n - 2} → 1)`);
      const nodes: Record<string, { requires?: string[] }> = { root: {} };
      const middle = Array.from({ length: n - 2 }, (_, i) => `m${i}`);
      middle.forEach((m) => (nodes[m] = { requires: ['root'] }));
      nodes.sink = { requires: middle };
      const cpuBefore = cpuSnapshot(processNames(processes));
      const run = await graphRun(stack, graphOf(nodes, 'bench'), 16, 'throughput');
      results.throughput = {
        tasks: n, seconds: Math.round(run.finishS * 10) / 10, tasks_per_s: Math.round(n / run.finishS), phases: run.phases,
        cpu_ms_per_task: cpuSince(cpuBefore, cpuSnapshot(processNames(processes)), n),
      };
    }
    // before scale: the 100,000 tasks it leaves behind keep autovacuum busy for minutes (Postgres CPU per
    // claim+complete went from 1.7 to 3.4 ms when queue ran after it)
    if (only.has('queue')) {
      log('queue: enqueue → claim latency, claim+complete throughput with 16 claimers');
      results.queue = await runQueueBench({ rootUrl: stack.api.rootUrl, credentials: stack.api.root, tasks: sizes.queueTasks, claimers: 16, processNames: processNames(processes) });
    }
    if (only.has('scale')) {
      const { layers, width, fanIn } = sizes;
      const tasks = layers * width;
      log(`scale: ${tasks}-task layered DAG (${layers} layers × ${width}, fan-in ${fanIn})`);
      const nodes: Record<string, { requires?: string[] }> = {};
      let edges = 0;
      for (let l = 0; l < layers; l++) {
        for (let w = 0; w < width; w++) {
          const requires = l === 0 ? [] : Array.from({ length: fanIn }, (_, k) => `l${l - 1}-${(w + k * 7) % width}`);
          edges += new Set(requires).size;
          nodes[`l${l}-${w}`] = { requires: [...new Set(requires)] };
        }
      }
      const run = await graphRun(stack, graphOf(nodes, 'scale'), 16, 'scale');
      const history = await historyStats(stack, run.id);
      results.scale = {
        tasks, edges, submit_s: Math.round(run.submitS * 10) / 10, finish_s: Math.round(run.finishS * 10) / 10,
        max_rss_mb: separateProcesses
          ? {
              ...Object.fromEntries(processes.map((p) => [`tgs ${p.name}`, rssMb(p.child.pid as number)])),
              'bench (relay + fast worker)': rssMb(process.pid),
              'temporal dev server': rssMb(stack.temporal.process.pid as number),
            }
          : { 'tgs (api+relay+bridge+worker in one process)': rssMb(process.pid), 'temporal dev server': rssMb(stack.temporal.process.pid as number) },
        continue_as_new: history.continueAsNew, max_history_events: history.maxEvents, max_history_bytes: history.maxBytes,
      };
    }
    if (only.has('ui')) results.ui = await runUiBench({ stack, quick, log });
  } finally {
    await stopProcesses(processes);
    await stack.stop();
  }
  mkdirSync('bench/results', { recursive: true });
  const json = JSON.stringify(results, null, 2);
  writeFileSync('bench/results/latest.json', json);
  writeFileSync(`bench/results/${new Date().toISOString().replace(/[:.]/g, '-')}${quick ? '-quick' : ''}.json`, json);
  writeFileSync('bench/results/latest.md', `${renderMarkdown(results)}\n`);
  console.log(json);
  console.log(`\n${renderMarkdown(results)}`);
}

main().then(
  () => process.exit(0),
  (err: unknown) => {
    console.error('bench failed:', err);
    process.exit(1);
  },
);
