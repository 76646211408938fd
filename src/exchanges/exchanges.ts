/**
 * Exchange names. Queue and scheduler exchanges as docs/formats.md § Exchanges describes them.
 * All are durable topic exchanges. An optional deployment prefix (TGS_EXCHANGE_PREFIX) is
 * prepended to every name.
 */
export const queueExchanges = [
  'task-defined',
  'task-pending',
  'task-running',
  'artifact-created',
  'task-completed',
  'task-failed',
  'task-exception',
  'task-group-resolved',
] as const;
export type QueueExchange = (typeof queueExchanges)[number];

export const schedulerExchanges = [
  'task-graph-running',
  'task-graph-extended',
  'task-graph-blocked',
  'task-graph-finished',
  'task-graph-canceled',
] as const;
export type SchedulerExchange = (typeof schedulerExchanges)[number];

/**
 * tgs' own exchanges, between its processes, not part of the Taskcluster surface (docs/formats.md § tgs
 * exchanges). `dependent-task-defined`: a task created through createTask with dependencies, which its group's
 * workflow has to take in as a node; the bridge consumes it instead of every task-defined message. `task-stalled`: a
 * pending task has waited past TGS_STALL_AFTER_MS on a queue with no workers (src/queue/stalls.ts), for alerting.
 */
export const tgsExchanges = ['dependent-task-defined', 'task-stalled'] as const;
export type TgsExchange = (typeof tgsExchanges)[number];

export function tgsExchangeName(prefix: string, exchange: TgsExchange): string {
  return `${prefix}tgs/v1/${exchange}`;
}

export function queueExchangeName(prefix: string, exchange: QueueExchange): string {
  return `${prefix}queue/v1/${exchange}`;
}

export function schedulerExchangeName(prefix: string, exchange: SchedulerExchange): string {
  return `${prefix}scheduler/v1/${exchange}`;
}

export function allExchangeNames(prefix: string): string[] {
  return [
    ...queueExchanges.map((e) => queueExchangeName(prefix, e)),
    ...schedulerExchanges.map((e) => schedulerExchangeName(prefix, e)),
    ...tgsExchanges.map((e) => tgsExchangeName(prefix, e)),
  ];
}

/** `_` stands for any routing-key word that is not available (docs/formats.md § Queue exchanges). */
export const NONE = '_';

/**
 * Queue routing key (docs/formats.md § Queue exchanges): `<taskId>.<runId>.<workerGroup>.<workerId>.<provisionerId>.<workerType>.
 * <schedulerId>.<taskGroupId>.<routing>`; `routing` may contain dots.
 */
export function taskRoutingKey(parts: {
  taskId: string;
  runId?: number | undefined;
  workerGroup?: string | undefined;
  workerId?: string | undefined;
  provisionerId: string;
  workerType: string;
  schedulerId: string;
  taskGroupId: string;
  routing?: string | undefined;
}): string {
  return [
    parts.taskId,
    parts.runId === undefined ? NONE : String(parts.runId),
    parts.workerGroup ?? NONE,
    parts.workerId ?? NONE,
    parts.provisionerId,
    parts.workerType,
    parts.schedulerId,
    parts.taskGroupId,
    parts.routing || NONE,
  ].join('.');
}

/** Scheduler routing key (docs/formats.md § Scheduler exchanges): `_._._._._._.<schedulerId>.<taskGraphId>.<graph routing or _>`. */
export function graphRoutingKey(schedulerId: string, taskGraphId: string, routing: string | undefined): string {
  return ['_._._._._._', schedulerId, taskGraphId, routing || NONE].join('.');
}
