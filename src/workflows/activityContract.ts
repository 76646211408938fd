import type { DispatchItem } from './graphModel.js';
import type { AmendGraphRequest, AmendGraphResult, GraphMeta, GraphState, NodePage, Resolution, ResolvedState, TaskGraphInput } from './contract.js';
import type { HookFireResult } from './hookFireContract.js';

/**
 * The activities the workflows call, declared beside them (as Temporal's SDK declares its sinks on the workflow's
 * side): src/activities/ implements this (`createActivities(deps): Activities`), the scheduler worker's composition
 * root (src/processes/schedulerWorker.ts) hands them to its Temporal worker, and workflow code imports nothing
 * outside this folder but src/taskStates.ts. Every activity is idempotent: Temporal runs an activity at least once.
 */
export interface Activities {
  /**
   * Temporal-native start: validate and store the graph given as workflow input, acting as the client
   * TGS_TEMPORAL_CLIENT_ID with the same scope check as PUT /task-graph (nothing is written when it fails).
   */
  createGraph(taskGraphId: string, input: TaskGraphInput): Promise<void>;
  /**
   * Temporal-native amend (the `amendGraph` update): classify and store the edited graph file acting as
   * TGS_TEMPORAL_CLIENT_ID, as PUT /task-graph/<id>/amend does (nothing is written when it is refused). Idempotent:
   * the same file again finds every label unchanged.
   */
  amendGraph(taskGraphId: string, request: AmendGraphRequest): Promise<AmendGraphStored>;
  /** The graph's row as the workflow needs it; a graph of queue-level dependencies is created first if asked. */
  loadGraph(taskGraphId: string, createForQueue: boolean): Promise<GraphMeta>;
  /** A page of the graph's immutable structure (and, on a run's first load, its nodes' queue states). */
  loadNodes(taskGraphId: string, fromIdx: number, limit: number, withQueueState: boolean): Promise<NodePage>;
  /** Makes tasks of the graph's group that joined it through the queue its nodes. */
  joinTasks(taskGraphId: string, taskIds: string[]): Promise<{ nodeCount: number }>;
  /** Schedules ready tasks and reruns failed ones, as the queue's stored state allows. */
  dispatchTasks(taskGraphId: string, items: DispatchItem[]): Promise<DispatchResult>;
  /** Records the graph state and writes its scheduler exchange message in one transaction. */
  publishGraphEvent(
    taskGraphId: string,
    event: { kind: string; seq: number; state: GraphState; blockedBy: string[]; knownNodeCount: number; reason?: string },
  ): Promise<PublishResult>;
  /**
   * Who asked Temporal to cancel this run of the graph's workflow, and why: the identity and reason of its
   * WorkflowExecutionCancelRequested event, read from the run's history (the workflow SDK does not hand them to the
   * workflow). Best effort: empty when the history cannot be read.
   */
  cancelRequestOf(taskGraphId: string, runId: string): Promise<CancelRequestOrigin>;
  /** Cancels unresolved member tasks of the graph; other taskIds (a forged activity input) are ignored. */
  cancelTasks(taskGraphId: string, taskIds: string[]): Promise<void>;
  /** What the queue knows about tasks the workflow has not heard from: lost messages are recovered here. */
  reconcile(taskGraphId: string, taskIds: string[]): Promise<{ resolutions: Resolution[]; nodeCount: number }>;
  /** The action of a hook's Temporal Schedule: fires the hook for this schedule time (src/workflows/hookFire.ts). */
  fireScheduledHook(input: { hookGroupId: string; hookId: string; scheduledAt: string }): Promise<HookFireResult>;
}

export interface DispatchResult {
  /** tasks found already resolved in a newer run than the workflow knew (a retried activity, a manual queue action) */
  resolutions: Resolution[];
  /** reruns the queue refuses (deadline passed, 50 runs): the node keeps its resolution and says why */
  refused?: RefusedRerun[];
  /**
   * tasks not scheduled because the queue's stored state says their dependencies are not resolved (a forged or
   * stale `resolutions` signal), or not rerun/scheduled because they are not members of this graph
   */
  unready?: string[];
}

export interface RefusedRerun {
  taskId: string;
  /** the queue state the task stays in */
  state: ResolvedState;
  reason: string;
}

export interface CancelRequestOrigin {
  identity?: string;
  reason?: string;
}

export interface PublishResult {
  published: boolean;
  nodeCount: number;
  /** the graph had already ended so (a reset run of its workflow): nothing was written */
  ended?: 'finished' | 'canceled';
}

/** An amend as stored: the endpoint's answer, with every superseded node index (the `amend` update's list). */
export type AmendGraphStored = Omit<AmendGraphResult, 'superseded'> & { superseded: number[] };
