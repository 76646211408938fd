import * as wf from '@temporalio/workflow';
import { defineSearchAttributeKey } from '@temporalio/common';
import { shouldContinueAsNew } from './continueAsNew.js';
import type { Activities, DispatchResult, PublishResult } from '../activities/index.js';
import {
  QUERIES,
  SEARCH_ATTRIBUTES,
  SIGNALS,
  UPDATES,
  type CancelRequest,
  type CarriedState,
  type GraphMeta,
  type GraphState,
  type Resolution,
  type RerunRequest,
  type StatusQueryResult,
  type TaskGraphInput,
  type TaskQueryResult,
  type TuningOptions,
} from './contract.js';
import { GraphModel, NODE_STATE_NAMES, type DispatchItem } from './graphState.js';

export const resolutionsSignal = wf.defineSignal<[Resolution[]]>(SIGNALS.resolutions);
export const extendedSignal = wf.defineSignal<[{ nodeCount: number }]>(SIGNALS.extended);
export const tasksDefinedSignal = wf.defineSignal<[{ taskIds: string[] }]>(SIGNALS.tasksDefined);
export const rerunSignal = wf.defineSignal<[RerunRequest]>(SIGNALS.rerun);
export const cancelSignal = wf.defineSignal<[CancelRequest]>(SIGNALS.cancel);
export const statusQuery = wf.defineQuery<StatusQueryResult>(QUERIES.status);
export const taskQuery = wf.defineQuery<TaskQueryResult, [{ taskId?: string; label?: string }]>(QUERIES.task);
export const rerunUpdate = wf.defineUpdate<{ taskId: string; resetDependents: string[] }, [RerunRequest]>(UPDATES.rerun);

const DEFAULT_TUNING: Required<TuningOptions> = {
  // 1,000 tasks × ~60 bytes keeps one dispatch input near 60 KB, far below the 2 MB payload limit,
  // and 4 in flight keeps us far below the 2,000 pending-activity limit.
  dispatchBatch: 1000,
  maxDispatchInFlight: 4,
  reconcileAfterMs: 60_000,
  maxHistoryEvents: 10_000,
};
// 5,000 nodes with their requires is ~300 KB, under the 512 KB payload warning (20,000 was 1.1 MB).
const NODE_PAGE = 5_000;
const stateKey = defineSearchAttributeKey(SEARCH_ATTRIBUTES.state, 'KEYWORD');
const schedulerKey = defineSearchAttributeKey(SEARCH_ATTRIBUTES.schedulerId, 'KEYWORD');

// Loading structure and creating graphs move megabytes: regular activities with generous timeouts.
const bulk = wf.proxyActivities<Activities>({
  startToCloseTimeout: '5 minutes',
  retry: { initialInterval: '500ms', maximumInterval: '30s', nonRetryableErrorTypes: ['InvalidTaskGraph'] },
});
// The hot path (schedule, rerun, publish, reconcile) is a few ms of SQL: local activities save a
// round trip through the server (22 ms vs 49 ms signal → activity start measured on this machine).
const hot = (summary: string) =>
  wf.proxyLocalActivities<Activities>({
    startToCloseTimeout: '60 seconds',
    retry: { initialInterval: '100ms', maximumInterval: '10s' },
    summary,
  });

function graphIdFromWorkflowId(workflowId: string): string {
  const match = /^task-graph\/([A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw])$/.exec(workflowId);
  if (!match) {
    throw wf.ApplicationFailure.nonRetryable(
      `workflow id ${JSON.stringify(workflowId)} must be task-graph/<slugid>`,
      'InvalidTaskGraph',
    );
  }
  return match[1];
}

function describe(items: DispatchItem[]): string {
  const reruns = items.filter((i) => i.kind === 'rerun').length;
  const what = [items.length - reruns ? `schedule ${items.length - reruns}` : '', reruns ? `rerun ${reruns}` : '']
    .filter(Boolean)
    .join(', ');
  const ids = items.slice(0, 4).map((i) => i.taskId).join(', ');
  return `${what}: ${ids}${items.length > 4 ? `, … (+${items.length - 4})` : ''}`;
}

/**
 * An invalid graph fails the workflow itself with the activity's InvalidTaskGraph failure, so callers
 * (and the Web UI) see `InvalidTaskGraph` and the offending labels, not a generic ActivityFailure.
 */
async function invalidGraphFailsWorkflow<T>(call: Promise<T>): Promise<T> {
  try {
    return await call;
  } catch (err) {
    const cause = err instanceof wf.ActivityFailure ? err.cause : undefined;
    if (cause instanceof wf.ApplicationFailure && cause.type === 'InvalidTaskGraph') {
      throw wf.ApplicationFailure.create({ message: cause.message, type: 'InvalidTaskGraph', nonRetryable: true, details: cause.details as unknown[] });
    }
    throw err;
  }
}

export async function taskGraph(input: TaskGraphInput): Promise<{ taskGraphId: string; state: GraphState }> {
  const info = wf.workflowInfo();
  const taskGraphId = graphIdFromWorkflowId(info.workflowId);
  if (input.taskGraphId !== undefined && input.taskGraphId !== taskGraphId) {
    throw wf.ApplicationFailure.nonRetryable(
      `input taskGraphId ${input.taskGraphId} does not match workflow id ${info.workflowId}`,
      'InvalidTaskGraph',
    );
  }
  const tuning = { ...DEFAULT_TUNING, ...input.tuning };
  const carried: CarriedState | undefined = input.carried;
  if (!carried && input.tasks !== undefined) {
    // Started natively with the graph itself: create its tasks (validated like PUT /task-graph).
    await invalidGraphFailsWorkflow(bulk.createGraph(taskGraphId, input));
  }

  const model = new GraphModel();
  let meta: GraphMeta = await invalidGraphFailsWorkflow(bulk.loadGraph(taskGraphId, input.origin === 'queue'));
  const decoded = carried ? GraphModel.decodeCarried(carried) : undefined;
  const labels: string[] = [];
  const labelIndex = new Map<string, number>();
  const loadNodesUpTo = async (count: number) => {
    while (model.size < count) {
      const page = await bulk.loadNodes(taskGraphId, model.size, Math.min(NODE_PAGE, count - model.size), !decoded || model.size >= decoded.states.length);
      if (page.taskIds.length === 0) break;
      const from = model.size;
      model.addPage(page, decoded);
      page.labels.forEach((label, k) => {
        labels[from + k] = label;
        if (label) labelIndex.set(label, from + k);
      });
    }
  };
  await loadNodesUpTo(carried?.nodeCount ?? meta.nodeCount);
  // What loading the structure cost this run: a 100,000-task graph is ~80 events but ~7 MB of history,
  // over the server's size-based continue-as-new suggestion before any work is done.
  const loadedAt = { events: wf.workflowInfo().historyLength, bytes: wf.workflowInfo().historySize };
  for (const i of carried?.manualReruns ?? []) model.manualReruns.add(i);
  model.canceled = carried?.canceled ?? false;

  let publishedState: GraphState | null = carried?.publishedState ?? null;
  const messageSeq: Record<string, number> = { ...carried?.messageSeq };
  const rejected: string[] = [...(carried?.rejected ?? [])];
  let wantedNodeCount = meta.nodeCount;
  let extendedPending = false;
  const joinQueue: string[] = [];
  let cancelRequested = model.canceled;
  let dirty = true;
  let reconcileDue = false;
  let lastHeard = Date.now();
  let inFlight = 0;

  const nodeOf = (req: { taskId?: string; label?: string }) =>
    req.taskId !== undefined ? model.index.get(req.taskId) : req.label !== undefined ? labelIndex.get(req.label) : undefined;
  const nameOf = (req: { taskId?: string; label?: string }) =>
    req.taskId !== undefined ? `task ${req.taskId}` : `label ${JSON.stringify(req.label)}`;
  const doRerun = (req: RerunRequest) => {
    const i = nodeOf(req) as number;
    const reset = model.manualRerun(i, req.resetDependents === true);
    dirty = true;
    return { taskId: model.taskIds[i], resetDependents: reset.map((d) => model.taskIds[d]) };
  };

  wf.setHandler(resolutionsSignal, (items) => {
    lastHeard = Date.now();
    for (const r of items) model.applyResolution(r.taskId, r.runId, r.state);
    dirty = true;
  });
  wf.setHandler(extendedSignal, ({ nodeCount }) => {
    wantedNodeCount = Math.max(wantedNodeCount, nodeCount);
    extendedPending = true;
    dirty = true;
  });
  wf.setHandler(tasksDefinedSignal, ({ taskIds }) => {
    for (const id of taskIds) if (!model.index.has(id)) joinQueue.push(id);
    dirty = true;
  });
  wf.setHandler(rerunSignal, (req) => {
    const refusal = model.rerunRefusal(nodeOf(req ?? {}), nameOf(req ?? {}));
    if (refusal) {
      // A signal cannot answer its sender: record why, so status and the Web UI show it.
      rejected.push(`rerun of ${nameOf(req ?? {})} refused: ${refusal}`);
      if (rejected.length > 20) rejected.shift();
      wf.log.warn('rerun signal refused', { refusal, request: req });
      return;
    }
    doRerun(req);
  });
  wf.setHandler(cancelSignal, () => {
    cancelRequested = true;
    dirty = true;
  });
  wf.setHandler(rerunUpdate, (req) => doRerun(req), {
    validator: (req) => {
      const refusal = model.rerunRefusal(nodeOf(req ?? {}), nameOf(req ?? {}));
      if (refusal) throw new Error(refusal);
    },
  });
  const status = (): StatusQueryResult => ({
    schedulerId: meta.schedulerId,
    taskGraphId,
    state: model.graphState(),
    routing: meta.routing,
    counts: model.countsByName(),
    blockedBy: model.blockedBy(),
    nodeCount: model.size,
    refused: [...rejected],
  });
  wf.setHandler(statusQuery, status);
  wf.setHandler(taskQuery, (req) => {
    const i = nodeOf(req ?? {});
    if (i === undefined) throw new Error(`${nameOf(req ?? {})} is not in this task-graph`);
    return {
      taskId: model.taskIds[i],
      idx: i,
      label: labels[i] ?? '',
      member: model.member[i] === 1,
      state: NODE_STATE_NAMES[model.state[i]],
      rerunsLeft: model.rerunsLeft[i],
      requires: model.requiresOf(i).map((r) => model.taskIds[r]),
      dependents: model.dependentsOf(i).map((d) => model.taskIds[d]),
      lastRunId: model.lastRun[i],
    };
  });

  const startDispatch = (items: DispatchItem[]) => {
    inFlight++;
    hot(describe(items))
      .dispatchTasks(taskGraphId, items)
      .then(
        (result: DispatchResult) => {
          model.dispatched(items);
          for (const r of result.resolutions) model.applyResolution(r.taskId, r.runId, r.state);
          for (const r of result.refused ?? []) {
            if (!model.rerunRefused(r.taskId, r.state)) continue;
            rejected.push(`rerun of task ${r.taskId} refused by the queue: ${r.reason}`);
            if (rejected.length > 20) rejected.shift();
            wf.log.warn('rerun refused by the queue', { taskId: r.taskId, reason: r.reason });
          }
        },
        (err: unknown) => {
          wf.log.error('dispatch failed; will retry', { error: String(err) });
          model.dispatchFailed(items);
        },
      )
      .finally(() => {
        inFlight--;
        dirty = true;
      });
  };

  const showProgress = () => {
    const counts = model.countsByName();
    const parts = Object.entries(counts).map(([k, v]) => `${k} ${v}`);
    const blocked = model.blockedBy();
    wf.setCurrentDetails(
      [
        `**${model.graphState()}** · ${model.memberCount} tasks · ${parts.join(' · ')}`,
        blocked.length ? `blocked by ${blocked.slice(0, 5).join(', ')}${blocked.length > 5 ? ` (+${blocked.length - 5})` : ''}` : '',
        rejected.length ? `last refused signal: ${rejected[rejected.length - 1]}` : '',
      ]
        .filter(Boolean)
        .join('\n'),
    );
  };

  const publish = async (state: GraphState, kind: string): Promise<PublishResult> => {
    const seq = messageSeq[kind] ?? 0;
    const blockedBy = model.blockedBy();
    const result = await hot(`${kind} #${seq}`).publishGraphEvent(taskGraphId, {
      kind,
      seq,
      state,
      blockedBy,
      knownNodeCount: model.size,
    });
    if (result.published) {
      messageSeq[kind] = seq + 1;
      publishedState = state;
      wf.upsertSearchAttributes([
        { key: stateKey, value: state },
        { key: schedulerKey, value: meta.schedulerId },
      ]);
    }
    return result;
  };

  if (!carried) {
    await publish(model.graphState() === 'blocked' ? 'blocked' : 'running', 'task-graph-running');
  }

  // Reconciliation ticker: after reconcileAfterMs without news, ask the queue about live tasks.
  void (async () => {
    for (;;) {
      await wf.sleep(tuning.reconcileAfterMs);
      if (Date.now() - lastHeard >= tuning.reconcileAfterMs) {
        reconcileDue = true;
        dirty = true;
      }
    }
  })();

  for (;;) {
    await wf.condition(() => dirty);
    dirty = false;
    showProgress();

    if (cancelRequested && !model.canceled) {
      model.canceled = true;
      const ids = model.unresolvedMembers().map((i) => model.taskIds[i]);
      await hot(`cancel ${ids.length} task(s)`).cancelTasks(taskGraphId, ids);
    }
    if (joinQueue.length > 0) {
      const ids = joinQueue.splice(0, joinQueue.length);
      const { nodeCount } = await bulk.joinTasks(taskGraphId, ids);
      wantedNodeCount = Math.max(wantedNodeCount, nodeCount);
    }
    if (wantedNodeCount > model.size) {
      const before = model.memberCount;
      await loadNodesUpTo(wantedNodeCount);
      if (extendedPending && model.memberCount > before) await publish(model.graphState(), 'task-graph-extended');
      extendedPending = false;
      meta = { ...meta, nodeCount: model.size };
    }
    if (reconcileDue) {
      reconcileDue = false;
      lastHeard = Date.now();
      const live = [...model.liveMembers(), ...model.unresolvedExternals()].slice(0, 20_000).map((i) => model.taskIds[i]);
      const result = await hot(`reconcile ${live.length} task(s)`).reconcile(taskGraphId, live);
      for (const r of result.resolutions) model.applyResolution(r.taskId, r.runId, r.state);
      wantedNodeCount = Math.max(wantedNodeCount, result.nodeCount);
      if (result.nodeCount > model.size) dirty = true;
    }
    // Near the history limit: stop dispatching, drain what is in flight, then continue-as-new.
    const historyFull = shouldContinueAsNew(wf.workflowInfo(), loadedAt, tuning.maxHistoryEvents);
    while (!historyFull && !model.canceled && model.hasDispatchable() && inFlight < tuning.maxDispatchInFlight) {
      const items = model.takeDispatch(tuning.dispatchBatch);
      if (items.length === 0) break;
      startDispatch(items);
    }

    const state = model.graphState();
    if (state !== publishedState && (state === 'running' || state === 'blocked')) {
      await publish(state, state === 'blocked' ? 'task-graph-blocked' : 'task-graph-running');
    }
    if ((state === 'finished' || state === 'canceled') && inFlight === 0) {
      const result = await publish(state, state === 'finished' ? 'task-graph-finished' : 'task-graph-canceled');
      if (result.published) {
        showProgress();
        await wf.condition(wf.allHandlersFinished);
        return { taskGraphId, state };
      }
      // Tasks were added meanwhile (extend raced with the last completion): load them and go on.
      wantedNodeCount = Math.max(wantedNodeCount, result.nodeCount);
      dirty = true;
      continue;
    }
    if (historyFull && inFlight === 0 && joinQueue.length === 0 && wantedNodeCount <= model.size) {
      await wf.condition(wf.allHandlersFinished);
      const next: TaskGraphInput = {
        taskGraphId,
        tuning: input.tuning,
        carried: {
          ...model.carry(),
          publishedState,
          messageSeq,
          runs: (carried?.runs ?? 0) + 1,
          rejected,
        },
      };
      return wf.continueAsNew<typeof taskGraph>(next);
    }
  }
}
