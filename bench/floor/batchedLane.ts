/**
 * The floor of a batched lane: the least work any design must do, under the performance goal's rules, for tasks
 * created, claimed and completed in batches, with no tgs code in the loop (plain pg and amqplib, as the other floors).
 * bench/scenarios/peer.ts runs it in the same rounds as tgs's worker stream and graphile-worker's batched mode, so
 * that "a batched lane at ≤ 3× the batched equal-work peer's CPU a task" can be set against what the rules cost by
 * themselves: floor ÷ peer says whether any design can reach the goal, stream ÷ floor how far tgs is from the floor.
 *
 * The rules kept: every commit durable (the server's synchronous_commit, on here), every state change's message
 * written to an outbox in the statement that makes the change and deleted only once RabbitMQ confirmed it, every
 * message persistent, published to tgs's durable topic exchanges in its documented shape (docs/formats.md §
 * Exchanges: task-defined and task-pending at creation, task-running at the claim, task-completed at the report,
 * with their messageIds), and the bridge's quorum queue (bound to task-completed, task-failed and task-exception as
 * it was before the graph-signal lane, src/bridge/bridgeQueue.ts) drained and acknowledged by a consumer that reads each message's taskId, as the bridge
 * does. Each batch is one statement: B tasks created (their rows, definitions and two messages each), B claimed
 * (FOR UPDATE SKIP LOCKED by the claim's index, the latest run marked running, the definitions handed back as a
 * worker needs them), the same B completed (checked against the run and the worker that claimed it); the relay reads
 * B outbox rows, publishes them on a confirm channel in one socket write, waits for the confirms and deletes them.
 *
 * What a real lane does beyond this is left out, so the floor is a lower bound: no HTTP or frames to a worker, no
 * auth or temporary credentials, no tgs tasks-table indexes beyond the two a claim and a report need (tgs's table has
 * six more, which a change of state writes to wherever the new row falls in them: an update of `state` is never
 * HOT), no task-group-resolved message, no run history beyond the
 * task's runs array, the definition in a table of its own that the changes of state never rewrite.
 *
 * It runs in the bench process, on a database of its own on tgs's Postgres server (created here, dropped at the
 * end) and exchanges of its own prefix on tgs's RabbitMQ (so tgs's bridge never sees its messages; deleted at the
 * end). A measurement: `tasks` created in batches of `batch` (measured apart: `create`), the table vacuumed and
 * analyzed (as the peer's jobs are), then drained by CLAIMERS loops of claim-then-complete while the relay and the
 * consumer run beside them, until the consumer has every task-completed message and the outbox is empty.
 */
import { Writable } from 'node:stream';
import amqp, { type Channel, type ConfirmChannel, type ChannelModel, type ConsumeMessage, type SocketOptions } from 'amqplib';
import pg from 'pg';
import slugid from 'slugid';
import { bridgeBindings, bridgeQueueName } from '../../src/bridge/bridge.js';
import { bridgeDeadLetterName, declareBridgeQueue } from '../../src/bridge/bridgeQueue.js';
import { declareExchanges } from '../../src/exchanges/declare.js';
import { allExchangeNames, queueExchangeName } from '../../src/exchanges/exchanges.js';
import { cpuSince, cpuSnapshot } from '../cpu.js';
import { ownDatabase } from '../ownDatabase.js';
import { busyMsBetween, machineSnapshot } from '../machineCpu.js';
import { databaseCounts } from '../perTaskCounts.js';
import type { BenchStack } from '../scenario.js';

/** The batch sizes the peer scenario measures the floor at: graphile-worker's local queue is 500. */
export const LANE_FLOOR_BATCHES = [500, 100] as const;

/**
 * Loops of claim-then-complete: two, so that one's claim runs while the other's report does, as a stream worker's
 * claims and reports overlap (on 2 cores more would only wait on each other).
 */
const CLAIMERS = 2;

/** The relay's wait for more rows when the outbox is empty and no statement woke it (a backstop only). */
const RELAY_IDLE_MS = 50;

/**
 * The bridge's prefetch (src/bridge/bridge.ts): the consumer acknowledges what one socket read brought, up to the
 * last message, in one ack.
 */
const CONSUMER_PREFETCH = 2000;

/**
 * How long RabbitMQ's background is sampled before each drain and after it (their mean is taken): /proc counts 10 ms
 * ticks, so a second gives it to 1 % of a core. Seen here: 0-10 ms a second in most samples (~0.003 ms a task over
 * a drain of 20,000 tasks at 4,000 a second), 50-100 ms a second while other test runs used the broker.
 */
const RABBITMQ_IDLE_SAMPLE_MS = 1000;

const SCHEMA_SQL = `
  CREATE TABLE tasks (
    task_id        text PRIMARY KEY,
    task_group_id  text NOT NULL,
    scheduler_id   text NOT NULL,
    project_id     text NOT NULL,
    provisioner_id text NOT NULL,
    worker_type    text NOT NULL,
    priority       text NOT NULL,
    priority_rank  smallint NOT NULL,
    retries_left   integer NOT NULL,
    deadline       timestamptz NOT NULL,
    expires        timestamptz NOT NULL,
    tags           jsonb NOT NULL,
    state          text NOT NULL,
    runs           jsonb NOT NULL,
    taken_until    timestamptz,
    pending_since  timestamptz
  );
  -- the claim's order, as tgs's tasks_pending (src/sql/001_queue.sql)
  CREATE INDEX tasks_pending ON tasks (provisioner_id, worker_type, priority_rank DESC, pending_since, task_id) WHERE state = 'pending';
  CREATE TABLE task_definitions (task_id text PRIMARY KEY, definition jsonb NOT NULL);
  -- the message itself (json: stored and read back as text, never parsed again)
  CREATE TABLE outbox (id bigserial PRIMARY KEY, message_id text NOT NULL, exchange text NOT NULL, routing_key text NOT NULL, payload json NOT NULL);`;

/** A timestamp as Taskcluster writes it (Date.toISOString), from a timestamptz column. */
const iso = (column: string) => `to_char(${column} AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')`;

type MessageName = 'task-defined' | 'task-pending' | 'task-running' | 'task-completed';

/**
 * The columns of one message a row of `from` (alias `t`, a tasks row as a statement just wrote it): the queue
 * message of docs/formats.md § Queue exchanges, its routing key and messageId as tgs makes them
 * (src/queue/messages.ts), and the row's task_id to order by. `exchange` is the parameter holding the exchange's full
 * name.
 */
function messageSelect(from: string, name: MessageName, exchange: string): string {
  const claimed = name === 'task-running' || name === 'task-completed';
  const run = name === 'task-defined' ? undefined : 'jsonb_array_length(t.runs) - 1';
  const worker = (key: string) => (claimed ? `(t.runs -> -1 ->> '${key}')` : `'_'`);
  const routingKey = [`t.task_id`, run ? `(${run})` : `'_'`, worker('workerGroup'), worker('workerId'), 't.provisioner_id', 't.worker_type', 't.scheduler_id', 't.task_group_id', `'_'`].join(` || '.' || `);
  const extra = [
    ...(run ? [`'runId', ${run}`] : []),
    ...(claimed ? [`'workerGroup', t.runs -> -1 -> 'workerGroup'`, `'workerId', t.runs -> -1 -> 'workerId'`] : []),
    ...(name === 'task-running' ? [`'takenUntil', t.runs -> -1 -> 'takenUntil'`] : []),
  ];
  return `SELECT t.task_id, t.task_id || '/' || ${run ? `(${run})` : `'_'`} || '/${name}/' || jsonb_array_length(t.runs) AS message_id,
      ${exchange}::text AS exchange, ${routingKey} AS routing_key,
      json_build_object('version', 1, 'status', json_build_object('taskId', t.task_id, 'provisionerId', t.provisioner_id,
        'workerType', t.worker_type, 'taskQueueId', t.provisioner_id || '/' || t.worker_type, 'schedulerId', t.scheduler_id,
        'projectId', t.project_id, 'taskGroupId', t.task_group_id, 'priority', t.priority, 'deadline', ${iso('t.deadline')},
        'expires', ${iso('t.expires')}, 'retriesLeft', t.retries_left, 'state', t.state, 'runs', t.runs),
        ${[...extra, `'task', json_build_object('tags', t.tags)`].join(', ')}) AS payload
    FROM ${from} t`;
}

/**
 * The INSERT of the messages of each row of `from`, one of each name a row; with more than one name, a task's in the
 * order given (outbox ids are the publish order, and a task's messages go out in the order they happened).
 */
function messagesInsert(from: string, ...messages: [MessageName, string][]): string {
  const selects = messages.map(([name, exchange], k) => `SELECT ${k} AS k, m.* FROM (${messageSelect(from, name, exchange)}) m`);
  return `INSERT INTO outbox (message_id, exchange, routing_key, payload)
    SELECT message_id, exchange, routing_key, payload FROM (${selects.join(' UNION ALL ')}) messages${messages.length > 1 ? ' ORDER BY task_id, k' : ''}`;
}

/**
 * B tasks created pending with their first run, their definitions, and their task-defined then task-pending messages.
 * $1 taskIds, $2 definitions, $3 taskGroupId, $4 deadline, $5 expires, $6 now, $7 and $8 the two exchanges.
 */
const CREATE_SQL = `WITH created AS (
    INSERT INTO tasks (task_id, task_group_id, scheduler_id, project_id, provisioner_id, worker_type, priority, priority_rank,
                       retries_left, deadline, expires, tags, state, runs, pending_since)
    SELECT id, $3, 'tgs-bench', 'none', 'tgs-bench', 'lane-floor', 'lowest', 1, 5, $4::text::timestamptz, $5::text::timestamptz, '{}',
           'pending', jsonb_build_array(jsonb_build_object('runId', 0, 'state', 'pending', 'reasonCreated', 'scheduled', 'scheduled', $6::text)),
           $6::text::timestamptz
      FROM unnest($1::text[]) AS id
    RETURNING *
  ), definitions AS (
    INSERT INTO task_definitions SELECT * FROM unnest($1::text[], $2::jsonb[])
  )
  ${messagesInsert('created', ['task-defined', '$7'], ['task-pending', '$8'])}`;

/**
 * Up to $3 pending tasks claimed by worker $1/$2 in the claim's order, their latest run running until $4, started
 * $5, their task-running messages ($6 the exchange); the claimed tasks' ids, run ids and definitions for the worker.
 * The picked rows are found again by their primary key and their definitions by theirs, one probe a task: `UPDATE …
 * FROM picked` and a join with task_definitions were each planned as a hash join over every task (10 ms of a 20 ms
 * claim of 500, EXPLAIN ANALYZE on 20,000 tasks).
 */
const CLAIM_SQL = `WITH picked AS (
    SELECT task_id FROM tasks
     WHERE provisioner_id = 'tgs-bench' AND worker_type = 'lane-floor' AND state = 'pending' AND deadline > now()
     ORDER BY priority_rank DESC, pending_since, task_id
     LIMIT $3 FOR UPDATE SKIP LOCKED
  ), claimed AS (
    UPDATE tasks t SET state = 'running', taken_until = $4::text::timestamptz, pending_since = NULL,
      runs = jsonb_set(t.runs, ARRAY[(jsonb_array_length(t.runs) - 1)::text],
        (t.runs -> -1) || jsonb_build_object('state', 'running', 'workerGroup', $1::text, 'workerId', $2::text, 'takenUntil', $4::text, 'started', $5::text))
     WHERE t.task_id = ANY (ARRAY(SELECT task_id FROM picked))
    RETURNING t.*
  ), announced AS (
    ${messagesInsert('claimed', ['task-running', '$6'])}
  )
  SELECT c.task_id, jsonb_array_length(c.runs) - 1 AS run_id, (SELECT d.definition::text FROM task_definitions d WHERE d.task_id = c.task_id) AS definition
    FROM claimed c`;

/**
 * The runs $1/$2 completed by the worker $3/$4 that claims them, at $5, with their task-completed messages ($6 the
 * exchange); how many it completed (a run that is not that worker's running run is not).
 */
const COMPLETE_SQL = `WITH completed AS (
    UPDATE tasks t SET state = 'completed', taken_until = NULL,
      runs = jsonb_set(t.runs, ARRAY[r.run_id::text],
        (t.runs -> r.run_id) || jsonb_build_object('state', 'completed', 'reasonResolved', 'completed', 'resolved', $5::text))
      FROM unnest($1::text[], $2::int[]) AS r(task_id, run_id)
     WHERE t.task_id = r.task_id AND t.state = 'running' AND jsonb_array_length(t.runs) - 1 = r.run_id
       AND t.runs -> r.run_id ->> 'workerGroup' = $3 AND t.runs -> r.run_id ->> 'workerId' = $4
    RETURNING t.*
  ), announced AS (
    ${messagesInsert('completed', ['task-completed', '$6'])}
  )
  SELECT count(*)::int AS n FROM completed`;

const RELAY_READ_SQL = 'SELECT id, message_id, exchange, routing_key, payload::text AS payload FROM outbox ORDER BY id LIMIT $1';
const RELAY_DELETE_SQL = 'DELETE FROM outbox WHERE id = ANY($1::bigint[])';

/** A measurement's figures, in the peer scenario's shape (bench/scenarios/peer.ts), with the creation apart. */
export interface LaneFloorFigures {
  per_s: number;
  machine_ms_per_task: number;
  cpu_ms_per_task: Record<string, number>;
  per_task: { pg_transactions: number; pg_rows_written: number; messages: number };
  /** creating the tasks (two messages each, routed to no queue): measured apart, as tgs's and the peer's creations are */
  create: { machine_ms_per_task: number; cpu_ms_per_task: Record<string, number>; per_task: { pg_transactions: number; pg_rows_written: number; messages: number } };
  /**
   * RabbitMQ's CPU a message: the creation's (persistent, confirmed, routed to no queue) and, from the drain's, what
   * the task-completed message costs beyond that (stored in the quorum queue, delivered, acknowledged); both without
   * what RabbitMQ spent meanwhile on others (`background_ms_per_s`, measured idle before and after the drain: the broker
   * serves other test runs on this machine and tgs's idle processes).
   */
  rabbitmq_ms_per_message: { unrouted: number; quorum_queued_extra: number; background_ms_per_s: number };
}

/** The socket under an amqplib channel, to cork while a batch is written (one writev instead of a write a message). */
function socketUnder(ch: Channel): Writable {
  const stream = (ch as unknown as { connection: { stream: unknown } }).connection.stream;
  if (!(stream instanceof Writable)) throw new Error('amqplib channel without a socket');
  return stream;
}

const round2 = (x: number) => Math.round(x * 100) / 100;

export async function startBatchedLaneFloor(stack: BenchStack) {
  const database = await ownDatabase(stack, 'tgs_bench_lane_floor');
  // a session a claimer, one for the relay, one for the bench's own statements (truncate, vacuum, counts); the
  // plans as tgs's sessions make them (src/db/pool.ts: no JIT; no sequential scan where an index serves): with the
  // table analyzed all pending, the report planned a scan of every task for its 500 running ones (6 ms of 17 a batch)
  const pool = new pg.Pool({ connectionString: database.url, max: CLAIMERS + 2, options: '-c jit=off -c enable_seqscan=off' });
  await pool.query(SCHEMA_SQL);
  const prefix = `tgs-bench-lane-floor-${process.pid}/`;
  const config = { ...stack.config, exchangePrefix: prefix };
  const exchange = (short: Parameters<typeof queueExchangeName>[1]) => queueExchangeName(prefix, short);
  const queue = bridgeQueueName(config);
  // the relay's socket buffers a whole batch before its one write, as tgs's relay does (src/exchanges/bus.ts)
  const socketOptions: SocketOptions & { writableHighWaterMark: number } = { writableHighWaterMark: 1 << 20 };
  const publisher: ChannelModel = await amqp.connect(stack.config.amqpUrl, socketOptions);
  const consumerConnection: ChannelModel = await amqp.connect(stack.config.amqpUrl);
  const confirmChannel: ConfirmChannel = await publisher.createConfirmChannel();
  await declareExchanges(confirmChannel, prefix);
  const consumerChannel = await consumerConnection.createChannel();
  await declareBridgeQueue(consumerChannel, config, queue);
  // The bridge's queue as it was bound when this floor was measured (2026-11-29): to the resolution exchanges too.
  // Since the graph-signal lane (src/relay/graphSignalLane.ts) tgs's resolutions cross no queue of its own, so this
  // floor now does more than tgs must (RabbitMQ's quorum-queue share, 0.069 ms a task that night): kept, so its
  // figures stay comparable, until it is measured again without the queue.
  for (const short of ['task-completed', 'task-failed', 'task-exception'] as const) {
    for (const pattern of bridgeBindings(config)) await consumerChannel.bindQueue(queue, exchange(short), pattern);
  }
  await consumerChannel.prefetch(CONSUMER_PREFETCH);
  const names = () => new Map([...stack.processNames(), [process.pid, 'bench (lane floor)']]);

  /** Completed messages the consumer took, and what to call once it has as many as wanted. */
  const consumed = { count: 0, wanted: Infinity, reached: () => undefined as void };
  let unacked: ConsumeMessage | undefined;
  await consumerChannel.consume(queue, (msg) => {
    if (!msg) return;
    // what the bridge reads of each message: its task and run
    const { status, runId } = JSON.parse(msg.content.toString('utf8')) as { status: { taskId: string }; runId: number };
    if (typeof status.taskId !== 'string' || typeof runId !== 'number') throw new Error('lane floor: a message without its task');
    if (!unacked) setImmediate(() => {
      // everything one socket read delivered, acknowledged at once
      if (unacked) consumerChannel.ack(unacked, true);
      unacked = undefined;
    });
    unacked = msg;
    if (++consumed.count >= consumed.wanted) consumed.reached();
  });

  /**
   * The relay: reads, publishes, waits for the confirms, deletes; woken by each statement that wrote messages (a
   * wake while it reads makes it read again rather than sleep), and `relayed(total)` resolves once it has published
   * that many since the floor started.
   */
  const relay = { published: 0, stopped: false, woken: false, sleeping: undefined as (() => void) | undefined, error: undefined as unknown };
  const wakeRelay = () => {
    relay.woken = true;
    relay.sleeping?.();
  };
  let publishedWaiter: { total: number; resolve: () => void; reject: (err: unknown) => void } | undefined;
  const relayed = (total: number) =>
    new Promise<void>((resolve, reject) => {
      if (relay.error) reject(relay.error);
      else if (relay.published >= total) resolve();
      else publishedWaiter = { total, resolve, reject };
    });
  const relaySession = await pool.connect();
  const relaySocket = socketUnder(confirmChannel);
  let relayBatch = 500;
  const relayLoop = (async () => {
    while (!relay.stopped) {
      relay.woken = false;
      const { rows } = await relaySession.query<{ id: string; message_id: string; exchange: string; routing_key: string; payload: string }>(RELAY_READ_SQL, [relayBatch]);
      if (rows.length === 0) {
        if (!relay.woken) {
          await new Promise<void>((resolve) => {
            const timer = setTimeout(() => resolve(), RELAY_IDLE_MS);
            relay.sleeping = () => {
              clearTimeout(timer);
              resolve();
            };
          });
          relay.sleeping = undefined;
        }
        continue;
      }
      const timestamp = Math.floor(Date.now() / 1000);
      relaySocket.cork();
      for (const row of rows) {
        confirmChannel.publish(row.exchange, row.routing_key, Buffer.from(row.payload), { messageId: row.message_id, persistent: true, contentType: 'application/json', timestamp });
      }
      // amqplib hands its buffers to the socket on a later turn (its Mux writes from setImmediate)
      setImmediate(() => setImmediate(() => relaySocket.uncork()));
      await confirmChannel.waitForConfirms();
      await relaySession.query(RELAY_DELETE_SQL, [rows.map((r) => r.id)]);
      relay.published += rows.length;
      if (publishedWaiter && relay.published >= publishedWaiter.total) {
        publishedWaiter.resolve();
        publishedWaiter = undefined;
      }
    }
  })().catch((err: unknown) => {
    relay.error = err;
    publishedWaiter?.reject(err);
  });

  /**
   * pg_stat_database's counts of the floor's database, once its sessions have published theirs. A backend publishes
   * its counts as it goes idle, at most once a second: one that published less than a second before waits 10 s
   * more (PG 15's PGSTAT_IDLE_INTERVAL), and a first try read 4 rows written a task of the drain's 6. So a second
   * after the last statement, each idle session runs one more (the relay's reads do that for its own).
   */
  const counts = async () => {
    await new Promise((r) => setTimeout(r, 1100));
    const idle = await Promise.all(Array.from({ length: CLAIMERS + 1 }, () => pool.connect()));
    await Promise.all(idle.map((session) => session.query('SELECT 1')));
    for (const session of idle) session.release();
    return databaseCounts(pool);
  };
  const perTask = (a: Awaited<ReturnType<typeof counts>>, b: Awaited<ReturnType<typeof counts>>, messages: number, tasks: number) => ({
    pg_transactions: round2((b.xacts - a.xacts) / tasks),
    pg_rows_written: round2((b.rows - a.rows) / tasks),
    messages: round2(messages / tasks),
  });

  /** RabbitMQ's CPU milliseconds a second while the floor sends it nothing, over RABBITMQ_IDLE_SAMPLE_MS. */
  const rabbitmqBackground = async () => {
    const before = cpuSnapshot(names());
    const started = performance.now();
    await new Promise((r) => setTimeout(r, RABBITMQ_IDLE_SAMPLE_MS));
    const ms = cpuSince(before, cpuSnapshot(names())).rabbitmq ?? 0;
    return ms / ((performance.now() - started) / 1000);
  };

  return {
    async measure(batch: number, tasks: number): Promise<LaneFloorFigures> {
      relayBatch = batch;
      await pool.query('TRUNCATE tasks, task_definitions, outbox');
      await pool.query('VACUUM (ANALYZE) tasks, task_definitions, outbox');
      const taskGroupId = slugid.nice();
      const now = Date.now();
      const deadline = new Date(now + 3600_000).toISOString();
      const expires = new Date(now + 2 * 86_400_000).toISOString();
      const ids = Array.from({ length: tasks }, () => slugid.nice());

      // creation: B tasks a statement, the relay publishing beside it; done once every message is out
      const startMessages = relay.published;
      const createCounts = await counts();
      const createCpu = cpuSnapshot(names());
      const createMachine = machineSnapshot();
      const createStarted = performance.now();
      for (let i = 0; i < tasks; i += batch) {
        const some = ids.slice(i, i + batch);
        const definitions = some.map((taskId, k) => JSON.stringify({
          taskId, provisionerId: 'tgs-bench', workerType: 'lane-floor', taskGroupId, schedulerId: 'tgs-bench', deadline, expires,
          created: new Date(now).toISOString(), payload: { outcomes: ['completed'] }, metadata: { name: `lf${i + k}`, description: 'lane floor task', owner: 'bench@example.com', source: 'https://example.com/tgs' },
        }));
        await pool.query(CREATE_SQL, [some, definitions, taskGroupId, deadline, expires, new Date().toISOString(), exchange('task-defined'), exchange('task-pending')]);
        wakeRelay();
      }
      await relayed(startMessages + 2 * tasks);
      const createSeconds = (performance.now() - createStarted) / 1000;
      const createMachineMs = busyMsBetween(createMachine, machineSnapshot());
      const createCpuAfter = cpuSnapshot(names());
      const createByProcess = cpuSince(createCpu, createCpuAfter, tasks);
      const createRabbitmqMs = cpuSince(createCpu, createCpuAfter).rabbitmq ?? 0;
      const create = { machine_ms_per_task: round2(createMachineMs / tasks), cpu_ms_per_task: createByProcess, per_task: perTask(createCounts, await counts(), 2 * tasks, tasks) };
      await pool.query('VACUUM (ANALYZE) tasks, task_definitions, outbox');
      const backgroundBefore = await rabbitmqBackground();

      // the drain: claimers claim B and complete them; the relay publishes; the consumer takes every completion
      const drainMessages = relay.published;
      consumed.count = 0;
      consumed.wanted = tasks;
      const allConsumed = new Promise<void>((resolve) => (consumed.reached = resolve));
      const drainCounts = await counts();
      const cpuBefore = cpuSnapshot(names());
      const machineBefore = machineSnapshot();
      const t0 = performance.now();
      let completed = 0;
      await Promise.all(
        Array.from({ length: CLAIMERS }, async (_, k) => {
          const session = await pool.connect();
          try {
            for (;;) {
              const takenUntil = new Date(Date.now() + 20 * 60_000).toISOString();
              const claim = await session.query<{ task_id: string; run_id: number; definition: string }>(CLAIM_SQL, ['lane-floor', `w${k}`, batch, takenUntil, new Date().toISOString(), exchange('task-running')]);
              wakeRelay();
              if (claim.rows.length === 0) return;
              const done = await session.query<{ n: number }>(COMPLETE_SQL, [claim.rows.map((r) => r.task_id), claim.rows.map((r) => r.run_id), 'lane-floor', `w${k}`, new Date().toISOString(), exchange('task-completed')]);
              wakeRelay();
              if (done.rows[0].n !== claim.rows.length) throw new Error(`lane floor: ${done.rows[0].n} of ${claim.rows.length} claimed runs completed`);
              completed += done.rows[0].n;
            }
          } finally {
            session.release();
          }
        }),
      );
      if (completed !== tasks) throw new Error(`lane floor: ${completed} of ${tasks} tasks completed`);
      await Promise.all([allConsumed, relayed(drainMessages + 2 * tasks)]);
      const seconds = (performance.now() - t0) / 1000;
      const machineMs = busyMsBetween(machineBefore, machineSnapshot());
      const cpuAfter = cpuSnapshot(names());
      const cpu = cpuSince(cpuBefore, cpuAfter, tasks);
      const background = (backgroundBefore + (await rabbitmqBackground())) / 2;
      // RabbitMQ's CPU a task without its background over each phase's seconds, from the milliseconds unrounded
      const rabbitmqOwn = (ms: number, phaseSeconds: number) => (ms - background * phaseSeconds) / tasks;
      const rabbitUnrouted = rabbitmqOwn(createRabbitmqMs, createSeconds) / 2;
      return {
        per_s: Math.round(tasks / seconds),
        machine_ms_per_task: round2(machineMs / tasks),
        cpu_ms_per_task: cpu,
        per_task: perTask(drainCounts, await counts(), relay.published - drainMessages, tasks),
        create,
        rabbitmq_ms_per_message: {
          unrouted: Math.round(rabbitUnrouted * 1000) / 1000,
          // the drain's two messages a task: task-running (routed nowhere) and task-completed (into the quorum queue)
          quorum_queued_extra: Math.round((rabbitmqOwn(cpuSince(cpuBefore, cpuAfter).rabbitmq ?? 0, seconds) - 2 * rabbitUnrouted) * 1000) / 1000,
          background_ms_per_s: round2(background),
        },
      };
    },
    async stop() {
      relay.stopped = true;
      wakeRelay();
      await relayLoop;
      relaySession.release();
      await consumerChannel.deleteQueue(queue).catch(() => undefined);
      await consumerChannel.deleteQueue(bridgeDeadLetterName(config)).catch(() => undefined);
      await consumerChannel.deleteExchange(bridgeDeadLetterName(config)).catch(() => undefined);
      for (const declared of allExchangeNames(prefix)) await consumerChannel.deleteExchange(declared).catch(() => undefined);
      await consumerConnection.close().catch(() => undefined);
      await publisher.close().catch(() => undefined);
      // pg-pool's end() resolves once it has asked its sessions to end, not once they have: the DROP's FORCE can
      // still find one and end it, which its client reports as an error
      pool.on('error', () => undefined);
      await pool.end();
      await database.drop();
    },
  };
}
