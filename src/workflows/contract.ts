/**
 * The public contract of the `taskGraph` workflow: its name, task queue default, input, signals, queries and
 * update, the failure type of an invalid graph, and its search attributes. Defined once here and used by the
 * workflow, the API, the bridge and the tests, so every signal, query and update is type-checked at both ends.
 * Workflow code imports it, so it imports only `@temporalio/workflow`, types, and the pure src/taskStates.ts.
 */
import { defineQuery, defineSignal, defineUpdate } from '@temporalio/workflow';
import type { defineSearchAttributeKey } from '@temporalio/common';
import type { ResolvedState, TaskState } from '../taskStates.js';

export { TASK_STATES, TASK_STATE_CHAR, MISSING_TASK_CHAR, isResolved, taskStateOfChar } from '../taskStates.js';
export type { ResolvedState, TaskState } from '../taskStates.js';

export const WORKFLOW_TYPE = 'taskGraph';
export const DEFAULT_TASK_QUEUE = 'tgs-scheduler';
export const workflowIdFor = (taskGraphId: string) => `task-graph/${taskGraphId}`;

/** ApplicationFailure type of an invalid graph (or workflow id, or input): non-retryable, in activities and the workflow. */
export const INVALID_TASK_GRAPH = 'InvalidTaskGraph';

/**
 * The memo key holding the id of the deployment that started a graph's workflow (src/db/deployment.ts): a worker
 * whose database lacks the graph fails it for good only when the memo names its own deployment (docs/temporal.md
 * § Several deployments on one namespace).
 */
export const DEPLOYMENT_MEMO = 'tgsDeployment';

/** ApplicationFailure type (retryable) of an activity that found the graph of another deployment's workflow missing here. */
export const GRAPH_OF_ANOTHER_DEPLOYMENT = 'GraphOfAnotherDeployment';

/** What `defineSearchAttributeKey(name, 'KEYWORD')` returns, written out: this module takes only types from common. */
type KeywordKey = ReturnType<typeof defineSearchAttributeKey<'KEYWORD'>>;

/** The search attributes the workflow upserts (Keyword), as typed keys; the worker registers them if missing. */
export const SEARCH_ATTRIBUTES = {
  state: { name: 'TaskGraphState', type: 'KEYWORD' },
  schedulerId: { name: 'TaskGraphSchedulerId', type: 'KEYWORD' },
} as const satisfies Record<string, KeywordKey>;

/**
 * `terminated` is never the workflow's own: the API's sweep marks a graph so when its workflow closed before the graph
 * ended (src/scheduler/closedWorkflows.ts), and a resume starts the workflow again.
 */
export type GraphState = 'running' | 'blocked' | 'finished' | 'canceled' | 'terminated';
/** The queue's task state (src/taskStates.ts). */
export type QueueTaskState = TaskState;

/** One resolution of a task's latest run, as the bridge (or reconciliation) reports it. */
export interface Resolution {
  taskId: string;
  runId: number;
  state: ResolvedState;
  reasonResolved?: string;
}

/** A task of the graph, named by its taskId or its graph label. */
export interface TaskRef {
  taskId?: string;
  label?: string;
}

/** A manual rerun of a member task (by taskId or label). */
export interface RerunRequest extends TaskRef {
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
  /**
   * While nothing changes, each reconcile waits twice as long as the one before, up to this (ms); news starts again
   * from reconcileAfterMs. Runs before QUIET_RECONCILE_PATCH reconciled every reconcileAfterMs.
   */
  reconcileMaxMs?: number;
  /** Continue-as-new once history has this many events, even if the server has not suggested it. */
  maxHistoryEvents?: number;
  /** Once due to continue as new, the longest wait for the tasks live in the queue to resolve first (ms). */
  continueQuietWaitMs?: number;
  /** Nodes per loadNodes page, at most (and by default) 5,000. */
  nodePage?: number;
}

/** State carried across continue-as-new: compact, derived structure is reloaded from Postgres. */
export interface CarriedState {
  nodeCount: number;
  /**
   * Version 2 (packNodes in codec.ts): per node its state (see NODE in graphModel.ts) and reset flag, reruns left,
   * and the highest runId whose resolution was applied (-1 for none), as three base64 byte planes.
   */
  nodes?: string;
  /** version 2: values that do not fit a byte, as flat [idx, plane, value] triples */
  nodeExceptions?: number[];
  /** version 1 (carried by workflows that continued as new before version 2): base64 Uint8Array of node states */
  states?: string;
  /** version 1: base64 Int16Array */
  rerunsLeft?: string;
  /** version 1: base64 Int16Array: highest runId whose resolution was applied, -1 for none */
  lastRun?: string;
  /** version 1: base64 Uint8Array: 1 where a reset dependent must be rerun rather than scheduled */
  reset?: string;
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
 * `{taskGraphId}`; started natively with Temporal with the graph itself in the task-graph format (docs/formats.md).
 */
export interface TaskGraphInput {
  taskGraphId?: string;
  carried?: CarriedState;
  tuning?: TuningOptions;
  /** 'queue' when started by the bridge for a task group that uses queue-level dependencies */
  origin?: 'graph' | 'queue';
  /** the task-graph format (docs/formats.md) when started natively */
  routing?: string;
  tasks?: Record<string, unknown>;
  [key: string]: unknown;
}

/** What the workflow returns when the graph is finished or canceled. */
export interface TaskGraphResult {
  taskGraphId: string;
  state: GraphState;
}

/** The workflow's signature, for typed starts and continue-as-new. */
export type TaskGraphWorkflow = (input: TaskGraphInput) => Promise<TaskGraphResult>;

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
  /** queue state per node, one char (TASK_STATE_CHAR), or MISSING_TASK_CHAR when the task does not exist */
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
  /** 'graph': stored by createTaskGraph (HTTP or Temporal-native); 'queue': a task group with queue-level dependencies */
  origin?: 'graph' | 'queue';
}

export interface RerunAccepted {
  taskId: string;
  /** taskIds of the resolved dependents that run again after it */
  resetDependents: string[];
}

/** Resolutions of latest runs, batched by the bridge (or sent by anyone who knows better). */
export const resolutionsSignal = defineSignal<[Resolution[]]>('resolutions');
/** The graph has this many nodes in Postgres now (an extend, a queue-level dependency). */
export const extendedSignal = defineSignal<[{ nodeCount: number }]>('extended');
/** Tasks of the graph's group were defined in the queue (queue-level graphs join them). */
export const tasksDefinedSignal = defineSignal<[{ taskIds: string[] }]>('tasksDefined');
/** A manual rerun that cannot answer: a refusal is recorded in `status.refused`. */
export const rerunSignal = defineSignal<[RerunRequest]>('rerun');
export const cancelSignal = defineSignal<[CancelRequest]>('cancel');
export const statusQuery = defineQuery<StatusQueryResult>('status');
export const taskQuery = defineQuery<TaskQueryResult, [TaskRef]>('task');
/**
 * One source of a graph's unresolved tasks, as the workflow's model sees it (the `explain` query): `failed` (no
 * reruns left), `external` (another group's unresolved task it depends on), `live` (pending or running in the
 * queue), `rerun` (about to run again), `ready` (about to be scheduled), `stuck` (waiting with its requirements met:
 * a model out of step with the queue).
 */
export interface ExplainCause {
  kind: 'failed' | 'external' | 'live' | 'rerun' | 'ready' | 'stuck';
  taskId: string;
  label: string;
  /** unresolved members this source explains */
  count: number;
}

export interface ExplainQueryResult {
  state: GraphState;
  /** unresolved members */
  unresolved: number;
  /** members waiting on requirements */
  waiting: number;
  /** the sources explaining most first */
  causes: ExplainCause[];
  /** causes past the query's limit */
  omittedCauses: number;
}

export const explainQuery = defineQuery<ExplainQueryResult, [{ limit?: number }?]>('explain');
/** Reconcile now instead of after reconcileAfterMs of quiet: an explain call found a task the model should have scheduled. */
export const reconcileSignal = defineSignal<[]>('reconcile');
/** A manual rerun whose validator answers at once (the HTTP rerun endpoint). */
export const rerunUpdate = defineUpdate<RerunAccepted, [RerunRequest]>('rerunTask');

/**
 * An amend stored in Postgres (docs/formats.md § Amend): the graph has `nodeCount` nodes now, and the nodes at
 * `superseded` (every node any amend of the graph replaced or removed, so repeating the update is harmless) are no
 * longer members: their tasks were canceled if unresolved, and the graph neither waits for nor is blocked by them.
 */
export interface AmendRequest {
  nodeCount: number;
  superseded: number[];
}

export interface AmendAccepted {
  /** nodes this update took out of the graph's members (0 when repeated) */
  superseded: number;
  nodeCount: number;
}

/** Sent by the amend endpoint once the amend is committed; answered once the model has applied it. */
export const amendUpdate = defineUpdate<AmendAccepted, [AmendRequest]>('amend');

/**
 * A Temporal-native amend (docs/temporal.md § The amendGraph and amend updates): the whole edited graph file, as
 * PUT /task-graph/<id>/amend takes it. The workflow's activity stores it acting as TGS_TEMPORAL_CLIENT_ID, with the
 * endpoint's checks, then the model applies it as the `amend` update's.
 */
export interface AmendGraphRequest {
  tasks: Record<string, unknown>;
  dryRun?: boolean;
}

/** What the amend endpoint answers (docs/formats.md § Amend), and the nodes this update took out of the members. */
export interface AmendGraphResult {
  dryRun: boolean;
  /** the amend's number in the graph's history (absent for a dry run) */
  amend?: number;
  state: string;
  /** labels by class; `unchanged` is a count */
  classification: { changed: string[]; metadata: string[]; added: string[]; dependent: string[]; removed: string[]; unchanged: number };
  /** the new tasks, by label */
  tasks: { label: string; taskId: string }[];
  /** dependents whose completed run is kept, without a claim, if what they require comes out byte-identical (docs/formats.md § Early cutoff) */
  mayBeKept: string[];
  superseded: number;
  nodeCount: number;
}

export const amendGraphUpdate = defineUpdate<AmendGraphResult, [AmendGraphRequest]>('amendGraph');
