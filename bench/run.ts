/**
 * `npm run bench [-- --quick] [-- --only=hop,throughput,amend,queue,peer,scale,ui] [-- --layers=N --width=M] [-- --single-process] [-- --cold]
 * [-- --server-autovacuum]`: tgs against its floors, measured in one run on this machine, on warmed-up processes with
 * the database settled before each scenario (bench/settle.ts; --cold: neither, as the bench measured until
 * 2026-11-25) and autovacuum on (bench/autovacuum.ts; --server-autovacuum: as the server has it). Each scenario is a file under bench/scenarios/ with
 * `run(stack, sizes)`; this file reads the command line, starts the stack, runs the scenarios asked for and writes
 * bench/results/latest.json, a dated copy and a table.
 */
import { cpus, totalmem } from 'node:os';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync } from 'node:fs';
import { findTemporalCli } from '../src/temporal/devServer.js';
import { benchPostgresUrl } from './pgSocket.js';
import { countPostgresDatabase } from './cpu.js';
import { renderMarkdown } from './report.js';
import { FULL_SIZES, QUICK_SIZES, type BenchStack, type Sizes } from './scenario.js';
import { settle, warmUp } from './settle.js';
import { autovacuumForRun } from './autovacuum.js';
import { chromiumOptions } from '../support/uiBuild.js';
import { startBenchStack } from './stack.js';
import * as hop from './scenarios/hop.js';
import * as throughput from './scenarios/throughput.js';
import * as amend from './scenarios/amend.js';
import * as queue from './scenarios/queue.js';
import * as peer from './scenarios/peer.js';
import * as scale from './scenarios/scale.js';
import * as ui from './scenarios/ui.js';

/**
 * In the order they run: queue before scale, because the 100,000 tasks scale leaves behind keep autovacuum busy
 * for minutes (Postgres CPU per claim+complete went from 1.7 to 3.4 ms when queue ran after it); peer before it for
 * the same reason.
 */
const SCENARIOS: Record<string, { run(stack: BenchStack, sizes: Sizes): Promise<unknown> }> = { hop, throughput, amend, queue, peer, scale, ui };

function parseArgs(args: string[]) {
  const quick = args.includes('--quick');
  const onlyArg = args.find((a) => a.startsWith('--only='))?.slice(7);
  const sizes: Sizes = { ...(quick ? QUICK_SIZES : FULL_SIZES) };
  // --layers=N --width=M override the scale scenario's size (e.g. a 20,000-task run when 100,000 takes too long)
  for (const key of ['layers', 'width'] as const) {
    const value = args.find((a) => a.startsWith(`--${key}=`))?.split('=')[1];
    if (value) sizes[key] = Number(value);
  }
  return {
    quick,
    sizes,
    only: new Set((onlyArg ?? Object.keys(SCENARIOS).join(',')).split(',')),
    // By default the API, the bridge and the scheduler worker run as their own `tgs` processes, as in a
    // deployment (bench/stack.ts). --single-process keeps them in one.
    separateProcesses: !args.includes('--single-process'),
    cold: args.includes('--cold'),
    serverAutovacuum: args.includes('--server-autovacuum'),
  };
}

const log = (line: string) => console.error(`[bench ${new Date().toISOString().slice(11, 19)}] ${line}`);

async function machine(stack: BenchStack) {
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

async function main() {
  const { quick, sizes, only, separateProcesses, cold, serverAutovacuum } = parseArgs(process.argv.slice(2));
  // before minutes of other scenarios, whose results a failing ui scenario would take down with it
  if (only.has('ui') && !existsSync(chromiumOptions.executablePath)) {
    throw new Error(
      `the ui scenario drives Chromium, which is missing at ${chromiumOptions.executablePath}: install it (apt-get install -y chromium; ` +
        '`npm test` installs it too), set TGS_CHROMIUM to a Chromium binary, or leave the scenario out (--only=hop,throughput,queue,peer,scale)',
    );
  }
  log(`starting the stack (quick=${quick}, ${separateProcesses ? 'api, bridge and scheduler-worker as processes' : 'single process'})`);
  const stack = await startBenchStack({ separateProcesses, postgresUrl: benchPostgresUrl(), log });
  // the CPU of Postgres' client backends is counted for the bench's database only (bench/cpu.ts): others share the server
  countPostgresDatabase(new URL(stack.config.databaseUrl).pathname.slice(1));
  const autovacuum = await autovacuumForRun(stack.api.db.pool, log, serverAutovacuum).catch(async (err: unknown) => {
    await stack.stop();
    throw err;
  });
  const results: Record<string, unknown> = {
    machine: { ...(await machine(stack)), autovacuum: autovacuum.setting },
    quick,
    processes: separateProcesses ? 'api, bridge, scheduler-worker, relay as tgs processes; the fast worker in the bench process' : 'single',
    date: new Date().toISOString(),
    warm: !cold,
  };
  try {
    if (!cold) results.throughput_cold = await warmUp(stack, sizes);
    for (const [name, scenario] of Object.entries(SCENARIOS)) {
      if (!only.has(name)) continue;
      if (!cold) await settle(stack);
      results[name] = await scenario.run(stack, sizes);
    }
  } finally {
    await autovacuum.restore().catch((err: unknown) => log(`autovacuum: could not put the server's setting back (${String(err)}): run ALTER SYSTEM RESET autovacuum`));
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
