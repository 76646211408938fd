/**
 * The public contract of the `taskGraph` workflow: its name, task queue default, input, signals,
 * queries and update. Safe to import from workflow code and from clients (no Node built-ins).
 */
export const WORKFLOW_TYPE = 'taskGraph';
export const DEFAULT_TASK_QUEUE = 'tgs-scheduler';
export const workflowIdFor = (taskGraphId: string) => `task-graph/${taskGraphId}`;
export const SEARCH_ATTRIBUTES = { state: 'TaskGraphState', schedulerId: 'TaskGraphSchedulerId' } as const;

export type GraphState = 'running' | 'blocked' | 'finished' | 'canceled';
export type QueueTaskState = 'unscheduled' | 'pending' | 'running' | 'completed' | 'failed' | 'exception';
export type ResolvedState = 'completed' | 'failed' | 'exception';

/** One resolution of a task's latest run, as the bridge (or reconciliation) reports it. */
export interface Resolution {
  taskId: string;
  runId: number;
  state: ResolvedState;
  reasonResolved?: string;
}

export interface RerunRequest {
  /** taskId or label of a member task. */
  taskId?: string;
  label?: string;
  /** Also rerun dependents that already resolved, once this task completes again. */
  resetDependents?: boolean;
}

export interface CancelRequest {
  reason?: string;
}

export interface TuningOptions {
  /** Tasks per dispatch activity (schedule/rerun). */
  dispatchBatch?: number;
  /** Dispatch activities in flight at once. */
  maxDispatchInFlight?: number;
  /** Reconcile with the queue after this long without hearing anything (ms). */
  reconcileAfterMs?: number;
  /** Continue-as-new once history has this many events, even if the server has not suggested it. */
  maxHistoryEvents?: number;
}

/** State carried across continue-as-new: compact, derived structure is reloaded from Postgres. */
export interface CarriedState {
  nodeCount: number;
  /** base64 Uint8Array of node states (see NODE in graphState.ts) */
  states: string;
  /** base64 Int16Array */
  rerunsLeft: string;
  /** base64 Int16Array: highest runId whose resolution was applied, -1 for none */
  lastRun: string;
  /** base64 Uint8Array: 1 where a reset dependent must be rerun rather than scheduled */
  reset: string;
  /** members whose pending rerun is a manual one (does not consume reruns) */
  manualReruns: number[];
  canceled: boolean;
  publishedState: GraphState | null;
  /** message sequence per scheduler exchange, for stable message ids */
  messageSeq: Record<string, number>;
  runs: number;
  rejected: string[];
}

/**
 * Input of the workflow. Started by the HTTP API (the graph is already in Postgres) with
 * `{taskGraphId}`; started natively with Temporal (issue 8) with the graph itself in seed 000 format.
 */
export interface TaskGraphInput {
  taskGraphId?: string;
  carried?: CarriedState;
  tuning?: TuningOptions;
  /** 'queue' when started by the bridge for a task group that uses queue-level dependencies */
  origin?: 'graph' | 'queue';
  /** seed 000 graph format when started natively */
  routing?: string;
  tasks?: Record<string, unknown>;
  [key: string]: unknown;
}

export interface StatusQueryResult {
  schedulerId: string;
  taskGraphId: string;
  state: GraphState;
  routing: string;
  counts: Record<string, number>;
  blockedBy: string[];
  nodeCount: number;
  /** the latest refused rerun signals, newest last (a signal cannot answer its sender) */
  refused: string[];
}

export interface TaskQueryResult {
  taskId: string;
  label: string;
  idx: number;
  member: boolean;
  state: string;
  rerunsLeft: number;
  requires: string[];
  dependents: string[];
  lastRunId: number;
}

/** Names of the signals, queries and update. */
export const SIGNALS = {
  resolutions: 'resolutions',
  extended: 'extended',
  tasksDefined: 'tasksDefined',
  rerun: 'rerun',
  cancel: 'cancel',
} as const;
export const QUERIES = { status: 'status', task: 'task' } as const;
export const UPDATES = { rerun: 'rerunTask' } as const;

/** Structure of nodes [fromIdx, fromIdx + taskIds.length/22) as loadNodes returns it. */
export interface NodePage {
  fromIdx: number;
  /** concatenated 22-character slugids */
  taskIds: string;
  /** '1' member, '0' external, one char per node */
  members: string;
  /** '0' all-completed, '1' all-resolved */
  modes: string;
  requireCounts: number[];
  requires: number[];
  rerunsLeft: number[];
  /** graph labels of members ('' for externals) */
  labels: string[];
  /** queue state per node, one char: u p r c f e, or '-' when the task does not exist */
  queueStates?: string;
  /** latest runId per node, -1 for none */
  latestRuns?: number[];
}

export interface GraphMeta {
  taskGraphId: string;
  schedulerId: string;
  routing: string;
  nodeCount: number;
  state: GraphState;
}
