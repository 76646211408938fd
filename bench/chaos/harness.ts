import { randomBytes } from 'node:crypto';
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { cpus, totalmem, tmpdir } from 'node:os';
import path from 'node:path';
import pg from 'pg';
import slugid from 'slugid';
import { Client, Connection } from '@temporalio/client';
import { loadConfig, ROOT_CLIENT_ID } from '../../src/config.js';
import { bridgeQueueName } from '../../src/bridge/bridge.js';
import { createPool } from '../../src/db/pool.js';
import { UNPUBLISHED_COUNT } from '../../src/exchanges/outbox.js';
import { outboxCount } from '../../support/db.js';
import { migrate } from '../../src/db/migrate.js';
import { ApiClient, TgsApiError } from '../../src/client/http.js';
import { findTemporalCli, freePort } from '../../src/temporal/devServer.js';
import type { ChaosOptions, FaultName } from './options.js';
import { Fleet } from './processes.js';
import { ClusterTemporal, DurableTemporal } from './temporal.js';
import { Observer } from './observer.js';
import { startWorkers } from './workers.js';
import { graphBody, planGraph, rng, type GraphPlan } from './load.js';
import { injectFaults, type FaultRecord } from './faults.js';
import { addedRuns, runChecks, type Check, type TaskEnd } from './checks.js';
import { createVhost, deleteVhost, rabbitmqVersion } from './services.js';
import { faultFigures, progressAfter, type FaultFigures } from './figures.js';

export interface ChaosResult {
  ok: boolean;
  date: string;
  machine: Record<string, string | number>;
  conditions: Record<string, unknown>;
  graphs: number;
  tasks: number;
  seconds: number;
  faults: FaultFigures[];
  checks: Check[];
  /** fault-added runs over the whole run, by reason */
  addedRuns: Record<string, number>;
  duplicates: Record<string, number>;
  requestErrors: Record<string, number>;
  /** reports the queue answered with a refusal (a run no longer the worker's), by status and code */
  reportsRefused: Record<string, number>;
  logDir: string;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Retries a step that a fault may interrupt (a query while Postgres restarts). */
async function retrying<T>(fn: () => Promise<T>, timeoutMs = 120_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      return await fn();
    } catch (err) {
      if (Date.now() > deadline) throw err;
      await sleep(500);
    }
  }
}

/**
 * One chaos run: two copies of every tgs process against Postgres, RabbitMQ and a Temporal server with its
 * history on disk; graphs kept in flight while the faults strike one at a time and then together; then the
 * checks over what Postgres, the exchanges and the workers saw.
 */
export async function runChaos(options: ChaosOptions): Promise<ChaosResult> {
  const { log, services } = options;
  const started = Date.now();
  const id = randomBytes(4).toString('hex');
  const dir = mkdtempSync(path.join(tmpdir(), `tgs-chaos-${id}-`));
  const dbName = `tgs_chaos_${id}`;
  const vhost = `tgs-chaos-${id}`;
  const prefix = `chaos-${id}/`;
  log(`run ${id}: logs and Temporal history in ${dir}`);

  const admin = new pg.Client({ connectionString: `${services.pgBase}/postgres` });
  await admin.connect();
  await admin.query(`CREATE DATABASE ${dbName}`);
  const pgVersion = (await admin.query<{ server_version: string }>('SHOW server_version')).rows[0].server_version;
  await admin.end();
  const databaseUrl = `${services.pgBase}/${dbName}`;
  const pool = createPool(databaseUrl, 4);
  await migrate(pool);
  const amqpUrl = createVhost(services, vhost);
  const temporal = options.topology === 'cluster' ? await ClusterTemporal.start(dir, services.pgBase, log) : await DurableTemporal.start(dir);
  const rootAccessToken = randomBytes(20).toString('hex');
  const root = { clientId: ROOT_CLIENT_ID, accessToken: rootAccessToken };
  const apiPorts: [number, number] = [await freePort(), await freePort()];
  const rootUrls = apiPorts.map((p) => `http://127.0.0.1:${p}`);
  const fleetEnv: Record<string, string> = {
      DATABASE_URL: databaseUrl,
      AMQP_URL: amqpUrl,
      TEMPORAL_ADDRESS: temporal.address,
      TGS_TASK_QUEUE: 'tgs-scheduler',
      TGS_EXCHANGE_PREFIX: prefix,
      TGS_ROOT_ACCESS_TOKEN: rootAccessToken,
      TGS_CLAIM_TIMEOUT: String(options.claimTimeoutSeconds),
      TGS_SWEEP_INTERVAL_MS: '1000',
      TGS_CLAIM_WORK_WAIT_MS: '10000',
  };
  const fleet = new Fleet(fleetEnv, apiPorts, dir);
  // the queue the bridges consume, named as they name it (a RabbitMQ cluster's faults look up its leader)
  const bridgeQueue = { vhost, name: bridgeQueueName(loadConfig({ ...process.env, ...fleetEnv })) };
  const observer = new Observer(amqpUrl, prefix, log);
  let workers: ReturnType<typeof startWorkers> | undefined;
  const plans: GraphPlan[] = [];
  const taskIds = new Map<string, Map<string, string>>();
  const faults: FaultRecord[][] = [];
  let loadDone = false;
  // a failed run keeps its database and vhost (next to the logs) for diagnosis
  let keep = true;
  try {
    await observer.start();
    fleet.startAll();
    for (const url of rootUrls) await retrying(async () => (await fetch(`${url}/api/queue/v1/ping`)).ok || Promise.reject(new Error('not up')), 120_000);
    log('all eight tgs processes started; both APIs answer');
    workers = startWorkers({ rootUrls, credentials: root, slots: options.workerSlots, batch: options.claimBatch });

    // Load: keep concurrentGraphs graphs in flight until the faults are over and totalTasks were submitted.
    const size = Math.max(3, Math.round(options.totalTasks / options.concurrentGraphs));
    const random = rng(0xc4a05);
    const apis = rootUrls.map((u) => new ApiClient(u, root));
    let submittedTasks = 0;
    let faultsOver = false;
    const inFlight = new Set<string>();
    const submit = async (n: number) => {
      const plan = planGraph(slugid.nice(), n, size, random);
      const body = graphBody(plan, random, options.taskMaxMs);
      plans.push(plan);
      inFlight.add(plan.id);
      submittedTasks += plan.nodes.length;
      const res = await retrying(async () => {
        try {
          return await apis[n % 2].request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${plan.id}`, body);
        } catch (err) {
          if (err instanceof TgsApiError && err.status > 0 && err.status < 500) throw Object.assign(err, { final: true });
          return apis[(n + 1) % 2].request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${plan.id}`, body);
        }
      }, 300_000);
      taskIds.set(plan.id, new Map(res.tasks.map((t) => [t.label, t.taskId])));
    };
    const loader = (async () => {
      let n = 0;
      await Promise.all(Array.from({ length: options.concurrentGraphs }, () => submit(n++)));
      log(`${plans.length} graphs (${submittedTasks} tasks) submitted`);
      while (!(faultsOver && submittedTasks >= options.totalTasks)) {
        await sleep(500);
        const ids = [...inFlight];
        const { rows } = await retrying(() => pool.query<{ task_graph_id: string }>(`SELECT task_graph_id FROM task_graphs WHERE task_graph_id = ANY($1) AND state IN ('finished', 'blocked')`, [ids]));
        for (const r of rows) inFlight.delete(r.task_graph_id);
        const more = options.concurrentGraphs - inFlight.size;
        await Promise.all(Array.from({ length: more }, () => submit(n++)));
      }
      loadDone = true;
    })();
    loader.catch(() => undefined);

    // warm up: the pipeline is moving before the first fault
    await retrying(async () => workers!.reported >= Math.min(200, options.totalTasks / 10) || Promise.reject(new Error('warming up')), 300_000);
    log(`warm: ${workers.reported} reports`);
    const relaySessions = async () =>
      Number((await pool.query(`SELECT count(*) AS n FROM pg_stat_activity WHERE datname = current_database() AND (query LIKE 'SELECT pg_try_advisory_lock%' OR query LIKE 'LISTEN tgs_outbox%')`)).rows[0].n);
    const targets = { fleet, temporal, services, downMs: options.downMs, relaySessions, outOfRotation: (index: number, isOut: boolean) => workers?.outOfRotation(index, isOut), bridgeQueue };
    const groups: FaultName[][] = [...options.faults.map((f) => [f]), ...options.combined];
    // process type → readiness of its copies restarted last: a fault strikes a process type only once
    // both its copies serve again (the other types' restarts may still be under way)
    const readiness = new Map<string, Promise<void>[]>();
    const typeOf = (f: FaultName) => /^(?:kill|term)-(api|relay|bridge|scheduler-worker)-/.exec(f)?.[1];
    for (const group of groups) {
      await Promise.all(group.flatMap((f) => readiness.get(typeOf(f) ?? '') ?? []));
      log(`fault: ${group.join(' + ')}`);
      const records = await injectFaults(group, targets);
      for (const r of records) {
        const type = typeOf(r.name);
        if (type && r.ready) readiness.set(type, [...(readiness.get(type) ?? []), r.ready]);
      }
      faults.push(records);
      for (const r of records) if (r.error) log(`  ${r.name} failed: ${r.error}`);
      for (const r of records) if (r.node) log(`  ${r.name}: ${r.node}`);
      // progress again: a task that became pending after the fault completed (the whole loop works)
      const t0 = Math.min(...records.map((r) => r.startedAt));
      await retrying(async () => progressAfter(observer, t0) !== undefined || Promise.reject(new Error('no progress yet')), 180_000).catch(() => log('  no progress within 180 s'));
      await sleep(1000);
    }
    await Promise.all([...readiness.values()].flat());
    faultsOver = true;
    log(`faults done; ${workers.reported} reports so far; finishing the load`);
    await loader;

    // settle: every graph at its end, nothing pending or running, outbox drained, no message for 3 s
    const settleDeadline = Date.now() + options.settleTimeoutMs;
    for (;;) {
      const { rows } = await retrying(() =>
        pool.query<{ open_graphs: number; open_tasks: number; outbox: number }>(
          `SELECT (SELECT count(*) FROM task_graphs WHERE state = 'running') AS open_graphs,
                  (SELECT count(*) FROM tasks WHERE state IN ('pending', 'running')) AS open_tasks,
                  ${UNPUBLISHED_COUNT} AS outbox`,
        ),
      );
      // a loop, not Math.max(...): a full run sees ~150,000 message ids, past the arguments a call can take
      let lastMessage = 0;
      for (const seen of observer.messages.values()) lastMessage = Math.max(lastMessage, seen.at.at(-1) as number);
      const quiet = Date.now() - lastMessage > 3000;
      if ((rows[0].open_graphs === 0 && rows[0].open_tasks === 0 && rows[0].outbox === 0 && quiet) || Date.now() > settleDeadline) {
        if (Date.now() > settleDeadline) log(`settle timed out: ${JSON.stringify(rows[0])}`);
        break;
      }
      await sleep(1000);
    }
    await workers.stop();

    // the end state, from Postgres and Temporal
    const graphIds = plans.map((p) => p.id);
    const graphStates = new Map((await pool.query<{ task_graph_id: string; state: string }>('SELECT task_graph_id, state FROM task_graphs WHERE task_graph_id = ANY($1)', [graphIds])).rows.map((r) => [r.task_graph_id, r.state]));
    const tasks = new Map<string, TaskEnd>();
    for (const r of (await pool.query<{ task_id: string; task_group_id: string; runs: TaskEnd['runs'] }>('SELECT task_id, task_group_id, runs FROM tasks WHERE task_group_id = ANY($1)', [graphIds])).rows) {
      tasks.set(r.task_id, { taskId: r.task_id, graphId: r.task_group_id, runs: r.runs });
    }
    const outboxRows = await outboxCount(pool);
    const connection = await Connection.connect({ address: temporal.address });
    const runningWorkflows = new Set<string>();
    for await (const wf of new Client({ connection }).workflow.list({ query: `ExecutionStatus = 'Running'` })) {
      if (wf.workflowId.startsWith('task-graph/')) runningWorkflows.add(wf.workflowId.slice('task-graph/'.length));
    }
    await connection.close();
    const checks = runChecks({
      plans: plans.filter((p) => taskIds.has(p.id)),
      taskIds,
      graphStates,
      tasks,
      outboxRows,
      runningWorkflows,
      messages: observer.messages,
      claims: workers.claims,
      handedTwice: workers.handedTwice,
      gracefulStops: faults.flat().filter((f) => f.graceful).length,
      gracefulCuts: faults.flat().filter((f) => f.graceful).flatMap((f) => {
        const api = Number(f.name.slice(-1));
        return workers!.errors
          .filter((e) => e.api === api && e.kind === 'cut' && e.at >= f.startedAt && e.at <= f.startedAt + (f.graceful?.exitedAfterMs ?? 0) + 100)
          .map((e) => `${f.name}: ${e.what} cut at +${e.at - f.startedAt} ms (${e.message})`);
      }),
      unexpectedExits: [...fleet.processes.values()].flatMap((p) => p.unexpectedExits().map((e) => `${p.name} exited by itself (${e.code ?? e.signal}) at ${new Date(e.at).toISOString()}`)),
    });
    for (const c of checks) log(`${c.ok ? 'ok  ' : 'FAIL'} ${c.name} (${c.checked})${c.ok ? '' : `: ${c.failures.slice(0, 3).join('; ')}`}`);

    const duplicates: Record<string, number> = {};
    for (const s of observer.messages.values()) if (s.at.length > 1) duplicates[s.exchange] = (duplicates[s.exchange] ?? 0) + s.at.length - 1;
    const requestErrors: Record<string, number> = {};
    for (const e of workers.errors) requestErrors[`${e.kind} (${e.what.split(' ')[0]})`] = (requestErrors[`${e.kind} (${e.what.split(' ')[0]})`] ?? 0) + 1;
    keep = !checks.every((c) => c.ok);
    return {
      ok: checks.every((c) => c.ok),
      date: new Date(started).toISOString(),
      machine: machine(services.rabbitmqctl, pgVersion, services),
      conditions: {
        concurrentGraphs: options.concurrentGraphs, taskMaxMs: options.taskMaxMs, workerSlots: options.workerSlots, claimBatch: options.claimBatch,
        downMs: options.downMs, claimTimeoutSeconds: options.claimTimeoutSeconds, postgres: services.pgBase, rabbitmq: services.amqpBase,
        temporal: options.topology === 'cluster' ? 'cluster: frontend, history, matching, worker as four processes on the run\'s Postgres, 4 history shards' : 'dev server (SQLite on disk)',
        rabbitmqNodes: services.rabbitmqNodes ? `${services.rabbitmqNodes.length}-node cluster (${services.rabbitmqNodes.join(', ')}), the bridge queue a quorum queue` : 'one node',
        processes: 'api, relay, bridge, scheduler-worker: two copies each, node --import tsx src/cli/entry.ts; workers, observer and harness in one more node process',
      },
      graphs: plans.length,
      tasks: tasks.size,
      seconds: Math.round((Date.now() - started) / 1000),
      faults: faults.map((group, i) => faultFigures(group, faults[i + 1]?.[0]?.startedAt ?? Date.now(), { observer, workers: workers!, tasks })),
      checks,
      addedRuns: addedRuns(tasks.values()),
      duplicates,
      requestErrors,
      reportsRefused: workers.reportsRefused.reduce<Record<string, number>>((o, r) => ({ ...o, [`${r.status} ${r.code}`]: (o[`${r.status} ${r.code}`] ?? 0) + 1 }), {}),
      logDir: dir,
    };
  } finally {
    loadDone = true;
    await workers?.stop();
    await fleet.stopAll();
    await observer.stop();
    await temporal.stop({ keep });
    await pool.end();
    void loadDone;
    if (keep) {
      const cluster = temporal instanceof ClusterTemporal ? `, the Temporal cluster's databases ${temporal.cluster.databases.main} and ${temporal.cluster.databases.visibility}` : '';
      log(`kept for diagnosis: database ${databaseUrl}, vhost ${vhost}${cluster}, logs and Temporal history in ${dir}`);
    } else {
      deleteVhost(services, vhost);
      const c = new pg.Client({ connectionString: `${services.pgBase}/postgres` });
      await retrying(() => c.connect(), 30_000).catch(() => undefined);
      await c.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`).catch(() => undefined);
      await c.end().catch(() => undefined);
    }
  }
}

function machine(_ctl: string[], pgVersion: string, services: ChaosOptions['services']): Record<string, string | number> {
  const cli = findTemporalCli();
  return {
    nproc: cpus().length,
    cpuModel: cpus()[0]?.model ?? 'unknown',
    memGiB: Math.round(totalmem() / 2 ** 30),
    node: process.version,
    postgres: pgVersion,
    rabbitmq: rabbitmqVersion(services),
    temporal: cli ? execFileSync(cli, ['--version'], { encoding: 'utf8' }).trim() : 'unknown',
  };
}
