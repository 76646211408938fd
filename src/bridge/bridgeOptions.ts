import type pg from 'pg';
import type { Client } from '@temporalio/client';
import type { Config } from '../config.js';

// What a bridge is started with (src/bridge/bridge.ts startBridge) and the counters it keeps.

export interface BridgeOptions {
  config: Config;
  pool: pg.Pool;
  temporal: () => Promise<Client>;
  /**
   * Durable queue shared by every bridge process of this deployment (competing consumers); default
   * `bridgeQueueName(config)`, so two deployments on one vhost never take each other's messages.
   */
  queueName?: string;
  /** Flush a graph's batch after this long (ms) or at maxBatch messages, whichever comes first (src/graphSignals/flushSpacing.ts). */
  flushMs?: number;
  /**
   * Under load, at least this long (ms) between the starts of two flushes: a resolution arriving within it
   * of the previous flush waits for the rest of it, so bursts become one signal instead of many.
   */
  minFlushIntervalMs?: number;
  /**
   * After a flush that carried LOADED_FLUSH messages or more (a busy graph, not a chain), the next starts at least
   * this long (ms) after it instead of minFlushIntervalMs.
   */
  loadedFlushIntervalMs?: number;
  maxBatch?: number;
  /** One line per event; lines about one graph name it in `fields.taskGraphId` (src/log.ts lineLogger). */
  log?: (line: string, fields?: { taskGraphId?: string }) => void;
}

export interface BridgeStats {
  received: number;
  signals: number;
  resolutionsForwarded: number;
  dropped: number;
  /** messages given back to the queue for a later attempt */
  requeued: number;
  /** signals Temporal refused (their graph's messages are requeued with backoff) */
  failedSignals: number;
  // The next three count resolution messages, which reach the queue only from a binding an earlier bridge made (queued
  // before an upgrade) or published straight into it: graphs hear resolutions from the relay (src/relay/graphSignalLane.ts).
  /** resolutions of a run a later run of the task has overtaken (a rerun was quicker than the message): ignored */
  overtaken: number;
  /** resolutions the task's stored run contradicts (its run, or an older one, in another state: forged): ignored */
  disagreed: number;
  /** resolutions of tasks this deployment's database does not know */
  unknownTasks: number;
  /** messages in the dead-letter queue when last read (quorum queue only; tgs_bridge_dead_letter_messages) */
  deadLettered?: number;
}
