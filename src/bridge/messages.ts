import type { Config } from '../config.js';
import { tgsExchangeName } from '../exchanges/exchanges.js';
import type { Resolution, ResolvedState } from '../workflows/contract.js';

/** What the bridge forwards of one message of its queue: a task's resolution, or a dependent task's definition. */
export type ParsedMessage =
  | { kind: 'resolution'; taskId: string; resolution: Resolution }
  | { kind: 'defined'; taskId: string; resolution?: undefined };

const DEPENDENT_DEFINED = tgsExchangeName('', 'dependent-task-defined');

const RESOLUTION_EXCHANGES: Record<string, ResolvedState> = {
  'task-completed': 'completed',
  'task-failed': 'failed',
  'task-exception': 'exception',
};

/**
 * The bridge queue of a deployment: named after its exchange prefix and scheduler id. Before, every bridge
 * consumed `tgs/scheduler-bridge`, so the bridges of two deployments on one vhost competed for one queue and
 * each acked the other's resolutions as unknown (docs/deployments.md: upgrading from that queue).
 */
export function bridgeQueueName(config: Pick<Config, 'exchangePrefix' | 'schedulerId'>): string {
  return `${config.exchangePrefix}tgs/scheduler-bridge/${config.schedulerId}`;
}

/**
 * Binding patterns of the bridge queue. Routing keys are `<taskId>.<runId>.<workerGroup>.<workerId>.
 * <provisionerId>.<workerType>.<schedulerId>.<taskGroupId>.<routing>`: with TGS_BRIDGE_SCHEDULER_IDS set,
 * one pattern per scheduler id; otherwise every message of this deployment's (prefixed) exchanges, which
 * queue-level dependencies between tasks of any scheduler id need.
 */
export function bridgeBindings(config: Pick<Config, 'bridgeSchedulerIds'>): string[] {
  if (config.bridgeSchedulerIds.length === 0) return ['#'];
  return config.bridgeSchedulerIds.map((id) => `*.*.*.*.*.*.${id}.#`);
}

/**
 * Parses a message of the bridge's queue into what the bridge forwards; undefined for messages it ignores.
 * `exchange` is the exchange's name without the deployment prefix. A `queue/v1/task-defined` message counts as
 * a dependent-task-defined notice: bridges before that notice existed bound task-defined, and what such a binding
 * queued before an upgrade is still served.
 */
export function parseQueueMessage(exchange: string, body: unknown): ParsedMessage | undefined {
  if (exchange === DEPENDENT_DEFINED) {
    const taskId = (body as { taskId?: unknown } | null)?.taskId;
    return typeof taskId === 'string' ? { kind: 'defined', taskId } : undefined;
  }
  const b = body as { status?: { taskId?: string; runs?: { state?: string; reasonResolved?: string }[] }; runId?: number };
  const taskId = b?.status?.taskId;
  if (typeof taskId !== 'string') return undefined;
  if (exchange === 'queue/v1/task-defined') return { kind: 'defined', taskId };
  const state = exchange.startsWith('queue/v1/') ? RESOLUTION_EXCHANGES[exchange.slice('queue/v1/'.length)] : undefined;
  const runs = b.status?.runs ?? [];
  if (!state || typeof b.runId !== 'number') return undefined;
  // Only the latest run's resolution is final: an exception followed by the queue's own retry is not.
  if (b.runId !== runs.length - 1) return undefined;
  const reason = runs[b.runId]?.reasonResolved;
  return { kind: 'resolution', taskId, resolution: { taskId, runId: b.runId, state, ...(reason ? { reasonResolved: reason } : {}) } };
}

/**
 * A delivered message's exchange and body as parseQueueMessage takes them: the exchange without this deployment's
 * prefix (another prefix's exchange parses as nothing), the body as JSON; undefined for a body that is not JSON.
 */
export function parseDelivery(prefix: string, exchange: string, content: Buffer): ParsedMessage | undefined {
  const suffix = exchange.startsWith(prefix) ? exchange.slice(prefix.length) : '';
  try {
    return parseQueueMessage(suffix, JSON.parse(content.toString('utf8')));
  } catch {
    return undefined;
  }
}
