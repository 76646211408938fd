import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import slugid from 'slugid';
import pg from 'pg';
import amqp from 'amqplib';
import { eventually, stackEnv } from '../../support/stack.js';
import type { ClaimedTask } from '../../support/fastWorker.js';
import { useStack } from '../helpers/stackFixture.js';
import { fastTask } from '../../support/graphs.js';

/*
 * A scheduler worker killed (SIGKILL) between a cached node's lookup and its resolution: the dispatch's transaction
 * is held open by a lock this test takes on the node's task_cache row, which the dispatch writes last, after it
 * looked up and resolved the task from the cache. The worker dies there; its transaction never commits. A new
 * worker retries the workflow task: exactly one run, and one task-completed message written for it.
 */
let schedulerWorker: ChildProcess | undefined;
let release: () => void = () => undefined;
const claimed: string[] = [];
let holdSeed = false;


function spawnSchedulerWorker(): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', 'scheduler-worker'], { env: { ...process.env, ...stackEnv(stack) }, stdio: ['ignore', 'pipe', 'pipe'] });
  for (const stream of [child.stdout, child.stderr]) stream?.on('data', (d: Buffer) => process.env.TGS_TEST_VERBOSE && process.stderr.write(`[worker] ${d}`));
  return child;
}
const exited = (child: ChildProcess) => new Promise((resolve) => (child.exitCode !== null || child.signalCode ? resolve(null) : child.once('exit', resolve)));

const held = new Promise<void>((r) => (release = r));
const stack = useStack({
  inProcessWorker: false,
  worker: {
    provisionerId: 'tgs-test',
    workerType: 'cache-kill',
    concurrency: 2,
    decide: async (t: ClaimedTask) => {
      claimed.push(t.taskId);
      // the seed of the second graph waits (the payloads of both graphs are the same, so are their keys)
      if (holdSeed && t.task.metadata?.name === 'seed') {
        holdSeed = false;
        await held;
      }
      return 'completed' as const;
    },
  },
});
stack.onStart(async () => {
  schedulerWorker = spawnSchedulerWorker();
});
stack.onStop(async () => {
  release();
  schedulerWorker?.kill('SIGKILL');
});

/** seed (refresh: always runs, so the test can hold it; its key stays the same) → toolchain (use) */
const graph = () => ({
  tasks: {
    seed: { cache: { name: 'seed', mode: 'refresh' }, task: { ...fastTask('seed'), workerType: 'cache-kill' } },
    toolchain: { requires: ['seed'], cache: { name: 'toolchain' }, task: { ...fastTask('toolchain'), workerType: 'cache-kill' } },
  },
});

async function submit(body: unknown) {
  const taskGraphId = slugid.nice();
  const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}`, body);
  return { taskGraphId, id: (label: string) => res.tasks.find((t) => t.label === label)!.taskId };
}
const state = async (id: string) => (await stack.root.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${id}/status`)).status.state;

/** task-completed messages of one graph's tasks, counted per taskId, as a consumer bound to the exchange sees them */
async function countCompletions(taskGraphId: string) {
  const conn = await amqp.connect(stack.config.amqpUrl);
  const ch = await conn.createChannel();
  const { queue } = await ch.assertQueue('', { exclusive: true, autoDelete: true });
  const exchange = `${stack.config.exchangePrefix}queue/v1/task-completed`;
  await ch.assertExchange(exchange, 'topic', { durable: true });
  await ch.bindQueue(queue, exchange, `*.*.*.*.*.*.${stack.config.schedulerId}.${taskGraphId}.#`);
  const counts = new Map<string, number>();
  await ch.consume(queue, (m) => {
    if (!m) return;
    const taskId = JSON.parse(m.content.toString()).status.taskId as string;
    counts.set(taskId, (counts.get(taskId) ?? 0) + 1);
  }, { noAck: true });
  return { counts, close: () => conn.close() };
}

test('a scheduler worker killed between the lookup and the resolution: one run, one message', async () => {
  const pool = stack.api.db.pool;
  const first = await submit(graph());
  await eventually(async () => (await state(first.taskGraphId)) === 'finished', 'first graph finished', 60_000);
  await eventually(async () => (await stack.root.request<{ entries: unknown[] }>('scheduler', 'GET', '/cache/default/toolchain')).entries.length === 1, 'toolchain entry');

  const secondId = slugid.nice();
  holdSeed = true;
  const watch = await countCompletions(secondId);
  try {
    const res = await stack.root.request<{ tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${secondId}`, graph());
    const id = (label: string) => res.tasks.find((t) => t.label === label)!.taskId;
    await eventually(async () => claimed.includes(id('seed')), 'seed claimed');
    const locker = new pg.Client({ connectionString: stack.config.databaseUrl });
    await locker.connect();
    try {
      await locker.query('BEGIN');
      await locker.query('SELECT 1 FROM task_cache WHERE task_id = $1 FOR UPDATE', [id('toolchain')]);
      release();
      // the dispatch has looked up and resolved the task in its transaction, and waits for the row this test holds
      await eventually(async () => {
        const { rows } = await pool.query<{ n: number }>(
          "SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock' AND query LIKE 'UPDATE task_cache%'",
        );
        return rows[0].n > 0;
      }, 'the dispatch waits on the lock', 60_000);
      const { rows: inFlight } = await locker.query<{ state: string }>('SELECT state FROM tasks WHERE task_id = $1', [id('toolchain')]);
      assert.equal(inFlight[0].state, 'unscheduled', 'the resolution is not committed while the dispatch waits');
      schedulerWorker!.kill('SIGKILL');
      await exited(schedulerWorker!);
    } finally {
      await locker.query('ROLLBACK');
      await locker.end();
    }
    schedulerWorker = spawnSchedulerWorker();
    await eventually(async () => (await state(secondId)) === 'finished', 'second graph finished', 120_000);

    const { rows } = await pool.query<{ runs: { cachedFrom?: { taskId: string } }[] }>('SELECT runs FROM tasks WHERE task_id = $1', [id('toolchain')]);
    assert.equal(rows[0].runs.length, 1, 'exactly one run');
    assert.equal(rows[0].runs[0].cachedFrom?.taskId, first.id('toolchain'));
    assert.ok(!claimed.includes(id('toolchain')), 'no worker ran it');
    await eventually(async () => watch.counts.get(id('toolchain')) === 1 && watch.counts.get(id('seed')) === 1, 'both completions delivered');
    // anything doubled would have been written in the same transaction as the run: give a second delivery time to show
    await new Promise((r) => setTimeout(r, 1000));
    assert.equal(watch.counts.get(id('toolchain')), 1, 'exactly one task-completed message');
    const { rows: outbox } = await pool.query<{ n: number }>("SELECT count(*)::int AS n FROM outbox WHERE message_id LIKE $1 || '/%'", [id('toolchain')]);
    assert.equal(outbox[0].n, 0, 'nothing left to publish');
  } finally {
    await watch.close();
  }
});
