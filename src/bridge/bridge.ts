import { WorkflowNotFoundError, type Client } from '@temporalio/client';
import { sendTogether, type BusChannel, type BusMessage } from '../exchanges/bus.js';
import { observeBridgeLag } from '../observability/metrics.js';
import { OutageLog } from '../outageLog.js';
import { latestRuns } from '../queue/latestRuns.js';
import { graphsHearing, tasksJoiningGroups } from '../scheduler/graphStore.js';
import { startBridgeConsumer } from './consumer.js';
import { signalResolutions, signalTasksDefined } from '../graphSignals/graphSignals.js';
import { FlushSpacing } from '../graphSignals/flushSpacing.js';
import { confirmByStoredState, definedSignals, resolutionSignals } from '../graphSignals/flushPlan.js';
import { bridgeQueueName, parseDelivery, type ParsedMessage } from './messages.js';
import { SignalBackoff, type SignalOutcome } from '../graphSignals/signalBackoff.js';
import type { BridgeOptions, BridgeStats } from './bridgeOptions.js';
import { everyMinute } from '../everyMinute.js';
import { deploymentIdOf } from '../db/deployment.js';

export { bridgeBindings, bridgeQueueName, parseQueueMessage } from './messages.js';
export type { BridgeOptions, BridgeStats } from './bridgeOptions.js';

/** A message of the current batch, as parsed, with the delivery to ack. */
type Pending = ParsedMessage & { msg: BusMessage };

/**
 * AMQP → Temporal: consumes dependent-task-defined notices (and resolution messages an earlier bridge's binding
 * queued: graphs hear resolutions from the relay's graph-signal lane, src/relay/graphSignalLane.ts), batches them per
 * graph, and signals each graph's workflow once per flush. What a graph hears is the queue's stored state, not the
 * message's word: each resolution is checked against its task's row (latest run and its state) and dropped if the row
 * disagrees, so a message forged on the exchanges cannot resolve a task. A message is acked once every graph
 * it concerns accepted its signal (or has ended); only the messages of a graph whose signal failed are
 * requeued, after a backoff that grows with that graph's failures, so one graph cannot hold up the others.
 * The parts: messages.ts (parsing), consumer.ts + bridgeQueue.ts (RabbitMQ), flushPlan.ts (who hears what),
 * signalBackoff.ts (failures), flushSpacing.ts (when), graphSignals.ts (Temporal), those four in src/graphSignals/; the SQL beside its tables (latestRuns in
 * src/queue/latestRuns.ts, graphsHearing and tasksJoiningGroups in src/scheduler/graphStore.ts).
 */
export async function startBridge(options: BridgeOptions): Promise<{ stop(): Promise<void>; stats: BridgeStats }> {
  const { config, pool } = options;
  const log = options.log ?? ((line: string) => console.log(line));
  const maxBatch = options.maxBatch ?? 500;
  const spacing = new FlushSpacing({ flushMs: options.flushMs, minIntervalMs: options.minFlushIntervalMs, loadedIntervalMs: options.loadedFlushIntervalMs });
  const stats: BridgeStats = { received: 0, signals: 0, resolutionsForwarded: 0, dropped: 0, requeued: 0, failedSignals: 0, overtaken: 0, disagreed: 0, unknownTasks: 0 };
  let batch: Pending[] = [];
  /** the channel the batch's messages came on (they are acked on it) */
  let channel: BusChannel | undefined;
  /** the next flush, armed: cancels it */
  let timer: (() => void) | undefined;
  let flushing: Promise<void> | undefined;
  const flushOutage = new OutageLog(log, 'bridge: Postgres/Temporal');
  const backoff = new SignalBackoff();
  const delayed = new Set<NodeJS.Timeout>();
  const warnUnknown = everyMinute(
    log,
    (n, taskId) =>
      `bridge: WARNING ${n} resolution(s) of tasks this deployment's database does not know (e.g. ${taskId}); the RabbitMQ vhost looks shared with another deployment on the same exchanges: give each deployment its own TGS_EXCHANGE_PREFIX or TGS_BRIDGE_SCHEDULER_IDS`,
  );
  const noteDisagreed = everyMinute(
    log,
    (n, taskId) => `bridge: WARNING ignored ${n} resolution message(s) that the queue's stored run contradicts (e.g. task ${taskId}): not sent by this deployment's queue; check who else publishes on its exchanges`,
  );

  const settle = (ch: BusChannel, items: Iterable<Pending>) => {
    try {
      sendTogether(ch, () => {
        for (const p of items) ch.ack(p.msg);
      });
    } catch {
      // channel gone: the broker redelivers unacked messages anyway
    }
  };
  const requeueLater = (ch: BusChannel, items: Pending[], delayMs: number) => {
    stats.requeued += items.length;
    const t = setTimeout(() => {
      delayed.delete(t);
      try {
        for (const p of items) ch.nack(p.msg, false, true);
      } catch {
        // channel gone: the broker redelivered them when it closed
      }
    }, delayMs);
    delayed.add(t);
  };

  /** A signal of the flush, run: its outcome (a graph whose workflow has ended waits for nothing: it counts as accepted). */
  const run = async (key: string, msgs: Pending[], send: () => Promise<unknown>): Promise<SignalOutcome<Pending>> => {
    try {
      await send();
      stats.signals++;
      return { key, msgs };
    } catch (err) {
      return err instanceof WorkflowNotFoundError ? { key, msgs } : { key, msgs, error: err };
    }
  };

  /**
   * Reads what the flush needs from Postgres (acking the resolutions it refuses, which are added to `refused`) and sends
   * each graph its signal.
   */
  const signal = async (client: Client, items: Pending[], ch: BusChannel, refused: Set<Pending>): Promise<Promise<SignalOutcome<Pending>>[]> => {
    const sends: (() => Promise<SignalOutcome<Pending>>)[] = [];
    const resolutions = items.filter((p) => p.kind === 'resolution');
    const defined = items.filter((p) => p.kind === 'defined');
    if (resolutions.length > 0) {
      // The two reads at once, on two of the pool's sessions: who hears a task does not depend on its run's state, and
      // the rows of tasks the check refuses are left out below. One round trip less before the signal.
      const taskIds = [...new Set(resolutions.map((p) => p.taskId))];
      const [runs, hearingAll] = await Promise.all([latestRuns(pool, taskIds), graphsHearing(pool, taskIds)]);
      const checked = confirmByStoredState(resolutions, runs);
      stats.unknownTasks += checked.unknown.length;
      stats.disagreed += checked.disagreed.length;
      stats.overtaken += checked.overtaken.length;
      for (const p of checked.unknown) warnUnknown(p.taskId);
      for (const p of checked.disagreed) noteDisagreed(p.taskId);
      const refusedNow = [...checked.unknown, ...checked.overtaken, ...checked.disagreed];
      settle(ch, refusedNow);
      for (const p of refusedNow) refused.add(p);
      // Every graph that has the task as a node hears it: its own graph and graphs depending on it.
      const confirmedIds = new Set(checked.confirmed.map((c) => c.msg.taskId));
      const hearing = hearingAll.filter((h) => confirmedIds.has(h.task_id));
      for (const s of resolutionSignals(checked.confirmed, hearing)) {
        sends.push(() =>
          run(s.key, s.msgs, async () => {
            await signalResolutions(client, config, s.key, s.origin, s.resolutions);
            stats.resolutionsForwarded += s.resolutions.length;
          }),
        );
      }
    }
    if (defined.length > 0) {
      // Queue-level dependencies: a task created with dependencies joins its group's workflow.
      for (const s of definedSignals(defined, await tasksJoiningGroups(pool, defined.map((p) => p.taskId)))) {
        sends.push(() => run(s.key, s.msgs, () => signalTasksDefined(client, config, s.key, s.taskIds)));
      }
    }
    // every read done before the first signal goes: a read failing fails the whole flush, nothing forwarded
    return sends.map((send) => send());
  };

  const flush = async (items: Pending[], ch: BusChannel) => {
    let sent: Promise<SignalOutcome<Pending>>[];
    const refused = new Set<Pending>();
    try {
      sent = await signal(await options.temporal(), items, ch, refused);
      backoff.flushSucceeded();
      flushOutage.recovered();
    } catch (err) {
      // Postgres or the Temporal connection: nothing was forwarded; all of it comes back after a pause.
      flushOutage.failed(err, `${items.length} message(s) requeued, retried with backoff`);
      requeueLater(ch, items, backoff.flushFailed());
      return;
    }
    // the refused resolutions are acked already: a second ack of a delivery closes the channel (PRECONDITION_FAILED)
    const outcome = backoff.settle(items.filter((p) => !refused.has(p)), await Promise.all(sent));
    stats.failedSignals += outcome.failedSignals;
    for (const { key, failures } of outcome.recovered) log(`bridge: task-graph/${key} accepts signals again after ${failures} failure(s)`, { taskGraphId: key });
    for (const { key, error } of outcome.startedFailing) {
      log(`bridge: signal to task-graph/${key} failed (${(error as Error).message}); its messages are retried with backoff, other graphs go on`, { taskGraphId: key });
    }
    settle(ch, outcome.accepted);
    for (const p of outcome.accepted) observeBridgeLag(p.msg.properties);
    for (const [delay, msgs] of outcome.retries) requeueLater(ch, msgs, delay);
  };

  const scheduleFlush = (immediate: boolean) => {
    if (flushing) return;
    if (timer && !immediate) return;
    timer?.();
    const start = () => {
      timer = undefined;
      // a message that came while the timer ran may have moved the flush (the loaded interval's quiet rule)
      if (!immediate && batch.length < maxBatch) {
        const wait = spacing.delay(Date.now());
        if (wait > 0) {
          const t = setTimeout(start, wait);
          timer = () => clearTimeout(t);
          return;
        }
      }
      const items = batch;
      batch = [];
      const ch = channel;
      if (items.length === 0 || !ch) return;
      spacing.started(Date.now(), items.length);
      flushing = flush(items, ch).finally(() => {
        flushing = undefined;
        if (batch.length > 0) scheduleFlush(batch.length >= maxBatch);
      });
    };
    const delay = immediate ? 0 : spacing.delay(Date.now());
    if (delay > 0) {
      const t = setTimeout(start, delay);
      timer = () => clearTimeout(t);
    } else {
      // After the I/O callbacks of this turn of the event loop: the messages of one socket read are all in the batch by
      // then, as with a timer, without a timer's least wait of 1 ms (a chain's delivery → signal p50 was 1.5 ms of it).
      const t = setImmediate(start);
      timer = () => clearImmediate(t);
    }
  };

  const consumer = await startBridgeConsumer({
    config,
    queueName: options.queueName ?? bridgeQueueName(config),
    deploymentId: () => deploymentIdOf(pool),
    log,
    prefetch: 2000,
    onMessage(msg, ch) {
      channel = ch;
      stats.received++;
      const parsed = parseDelivery(config.exchangePrefix, msg.fields.exchange, msg.content);
      if (!parsed) {
        // Malformed, or a resolution of a run that is no longer the latest: nothing waits on it.
        stats.dropped++;
        ch.ack(msg);
        return;
      }
      batch.push({ msg, ...parsed });
      spacing.arrived(Date.now());
      scheduleFlush(batch.length >= maxBatch);
    },
    onDeadLetterDepth(messages) {
      stats.deadLettered = messages;
    },
    onLost() {
      // unacked messages go back to the queue when the channel closes
      batch = [];
      channel = undefined;
    },
  });

  return {
    stats,
    async stop() {
      timer?.();
      await flushing;
      for (const t of delayed) clearTimeout(t);
      await consumer.stop();
    },
  };
}
