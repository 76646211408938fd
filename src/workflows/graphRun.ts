/**
 * One run of the taskGraph workflow (until it ends or continues as new): the graph model, what the handlers
 * heard, and the steps of the main loop. Handlers only record news; `loop()` acts on it.
 */
import * as wf from '@temporalio/workflow';
import { ActivityFailure, ApplicationFailure } from '@temporalio/workflow';
import type { AmendGraphStored, DispatchResult, PublishResult } from './activityContract.js';
import { bulk, hot, lookup } from './activityProxies.js';
import { shouldContinueAsNew } from './continueAsNew.js';
import { AMEND_GRAPH_PATCH, AMEND_PATCH, amendGraphRefusal, amendRefusal, applyAmend } from './amend.js';
import {
  amendGraphUpdate,
  amendUpdate,
  cancelSignal,
  explainQuery,
  extendedSignal,
  reconcileSignal,
  rerunSignal,
  rerunUpdate,
  resolutionsSignal,
  SEARCH_ATTRIBUTES,
  statusQuery,
  taskQuery,
  tasksDefinedSignal,
  type CarriedState,
  type GraphMeta,
  type GraphState,
  type NodePage,
  type RerunAccepted,
  type RerunRequest,
  type StatusQueryResult,
  type TaskGraphInput,
  type TaskGraphResult,
  type TaskGraphWorkflow,
  type TaskQueryResult,
  type TaskRef,
  type TuningOptions,
} from './contract.js';
import { GraphModel, NODE_STATE_NAMES, SLUGID_LENGTH, type DispatchItem } from './graphModel.js';
import { Refusals } from './refusals.js';
import { explainModel } from './explain.js';

// 5,000 nodes with their requires is ~300 KB, under the 512 KB payload warning (20,000 was 1.1 MB).
const NODE_PAGE = 5_000;

const DEFAULT_TUNING: Required<TuningOptions> = {
  // 1,000 tasks × ~60 bytes keeps one dispatch input near 60 KB, far below the 2 MB payload limit,
  // and 4 in flight keeps us far below the 2,000 pending-activity limit.
  dispatchBatch: 1000,
  maxDispatchInFlight: 4,
  reconcileAfterMs: 60_000,
  // An hour: a graph waiting a day on a live task reconciles 28 times (at 1, 3, 7, 15, 31 and 63 min, then hourly), ~11
  // history events each, where every 60 s made 1,440 (docs/temporal.md § History a waiting graph writes).
  reconcileMaxMs: 3_600_000,
  maxHistoryEvents: 10_000,
  // A few seconds drain what a full dispatch left in the queue; a task that runs longer does not hold the graph back.
  continueQuietWaitMs: 30_000,
  nodePage: NODE_PAGE,
};

/**
 * The Temporal SDK's promise hook records a stack trace for every promise workflow code creates: 60 µs a promise on
 * the 100,000-task graph, ~36 promises an activation (docs/bench-journal/2026-11-26.md). Runs with this patch await a step of the
 * loop only when it has work, and continue as new only when quiet (quietEnoughToContinue); runs started before it
 * replay the way they were recorded (the commands of a workflow task, and when the run continues, depend on both).
 */
export const LEAN_LOOP_PATCH = 'loop-awaits-only-steps-with-work';

/**
 * Runs with this patch ask for the next node page while the one before it is applied (PAGES_IN_FLIGHT at once, applied
 * in order), where runs before it asked for each page once the one before it was in: a page's activity and the workflow
 * task that applies it took 60-80 ms each on a 10,000-task graph's start, one after the other.
 */
export const PAGES_TOGETHER_PATCH = 'node-pages-asked-for-together';

/**
 * Runs with this patch reconcile only while something is live in the queue (a member scheduled, a required task of
 * another group unresolved, a schedule the queue refused), and each time twice as long after the last while nothing
 * changes (reconcileAfterMs up to reconcileMaxMs); a graph blocked with nothing live sets no timer at all. Runs before
 * it reconciled every reconcileAfterMs whatever the graph held: 172 history events after 17 minutes of a blocked graph.
 */
export const QUIET_RECONCILE_PATCH = 'reconcile-only-what-is-live-backing-off';
// Two: each page's result (up to ~300 KB, more with long labels) sits in the history the worker is sent, and the
// activity of one overlaps the workflow task applying the other, which is what the start waited on.
const PAGES_IN_FLIGHT = 2;

function describe(items: DispatchItem[]): string {
  const reruns = items.filter((i) => i.kind === 'rerun').length;
  const what = [items.length - reruns ? `schedule ${items.length - reruns}` : '', reruns ? `rerun ${reruns}` : '']
    .filter(Boolean)
    .join(', ');
  const ids = items.slice(0, 4).map((i) => i.taskId).join(', ');
  return `${what}: ${ids}${items.length > 4 ? `, … (+${items.length - 4})` : ''}`;
}

export class GraphRun {
  private readonly model = new GraphModel();
  private readonly taskGraphId: string;
  private readonly input: TaskGraphInput;
  private readonly tuning: Required<TuningOptions>;
  private readonly carried: CarriedState | undefined;
  private readonly decoded: ReturnType<typeof GraphModel.decodeCarried> | undefined;
  private meta: GraphMeta;
  private readonly labels: string[] = [];
  private readonly labelIndex = new Map<string, number>();
  /** History length and size once the structure was loaded (see load). */
  private loadedAt = { events: 0, bytes: 0 };

  // What was announced: carried across continue-as-new.
  private publishedState: GraphState | null;
  /** message sequence per scheduler exchange, for stable message ids */
  private readonly messageSeq: Record<string, number>;
  private readonly refusals: Refusals;

  // News from the handlers (and the reconciliation ticker), acted on by the main loop.
  private wantedNodeCount: number;
  private extendedPending = false;
  private readonly joinQueue: string[] = [];
  private cancelRequested = false;
  /** who asked for the cancellation and why, as the `cancel` signal said (recorded with the canceled state) */
  private cancelReason: string | undefined;
  private reconcileDue = false;
  private lastHeard = 0;
  /** when the graph last changed by news: a resolution, or a reconcile that found one (QUIET_RECONCILE_PATCH) */
  private lastNews = 0;
  private dirty = true;
  /** an amendGraph update stored new nodes in this run (end() then looks for them once more) */
  private amendedNatively = false;
  private inFlight = 0;
  // Schedules the queue refused as not ready: tried again on the next news (a resolution, reconciliation), when the
  // queue may agree; never in a loop. Their nodes stay dispatching meanwhile, so the graph cannot finish without them.
  private readonly refusedSchedules: DispatchItem[] = [];
  private readonly refusedSeen = new Set<string>();
  /** LEAN_LOOP_PATCH: decided once, at the start of the run */
  private readonly lean: boolean;
  /** PAGES_TOGETHER_PATCH: decided once, at the start of the run */
  private readonly pagesTogether: boolean;
  /** QUIET_RECONCILE_PATCH: decided once, at the start of the run */
  private readonly quietReconcile: boolean;
  /** when this run first could have continued as new with tasks still live in the queue (quietEnoughToContinue) */
  private quietWaitFrom: number | undefined;
  /** load() and listen() done: a Temporal cancellation that came sooner finishes them first (endCanceledByTemporal) */
  private loaded = false;
  private listening = false;

  constructor(taskGraphId: string, input: TaskGraphInput, meta: GraphMeta) {
    this.taskGraphId = taskGraphId;
    this.input = input;
    this.meta = meta;
    this.tuning = { ...DEFAULT_TUNING, ...input.tuning };
    // a page of at least one node and at most NODE_PAGE, whatever a native start's input says
    const page = Math.floor(Number(this.tuning.nodePage));
    this.tuning.nodePage = page >= 1 && page <= NODE_PAGE ? page : NODE_PAGE;
    this.carried = input.carried;
    this.decoded = this.carried ? GraphModel.decodeCarried(this.carried) : undefined;
    this.publishedState = this.carried?.publishedState ?? null;
    this.messageSeq = { ...this.carried?.messageSeq };
    this.refusals = new Refusals(this.carried?.rejected);
    this.wantedNodeCount = meta.nodeCount;
    this.lean = wf.patched(LEAN_LOOP_PATCH);
    this.pagesTogether = wf.patched(PAGES_TOGETHER_PATCH);
    this.quietReconcile = wf.patched(QUIET_RECONCILE_PATCH);
  }

  /** Step 1: the structure (on a first run with the queue's states, else with the carried ones). */
  async load(): Promise<void> {
    await this.loadNodesUpTo(this.carried?.nodeCount ?? this.meta.nodeCount);
    // What loading the structure cost this run: a 100,000-task graph is ~80 events but ~7 MB of history,
    // over the server's size-based continue-as-new suggestion before any work is done.
    this.loadedAt = { events: wf.workflowInfo().historyLength, bytes: wf.workflowInfo().historySize };
    for (const i of this.carried?.manualReruns ?? []) this.model.manualReruns.add(i);
    this.model.canceled = this.carried?.canceled ?? false;
    this.cancelRequested = this.model.canceled;
    this.lastHeard = Date.now();
    this.lastNews = this.lastHeard;
    this.loaded = true;
  }

  private async loadNodesUpTo(count: number): Promise<void> {
    const { model, decoded } = this;
    const ask = (from: number) => bulk.loadNodes(this.taskGraphId, from, Math.min(this.tuning.nodePage, count - from), !decoded || from >= decoded.states.length);
    if (!this.pagesTogether) {
      while (model.size < count) {
        const page = await ask(model.size);
        if (page.taskIds.length === 0) break;
        this.addPage(page);
      }
      return;
    }
    // pages asked for ahead, in order: where the next one starts, and each one's answer
    const asked: Promise<NodePage>[] = [];
    let next = model.size;
    while (model.size < count) {
      while (asked.length < PAGES_IN_FLIGHT && next < count) {
        const page = ask(next);
        // a page asked for ahead may be dropped unread (below): its failure is then nobody's
        page.catch(() => undefined);
        asked.push(page);
        next += Math.min(this.tuning.nodePage, count - next);
      }
      const page = await (asked.shift() as Promise<NodePage>);
      if (page.taskIds.length === 0) break;
      const wanted = Math.min(this.tuning.nodePage, count - model.size);
      this.addPage(page);
      if (page.taskIds.length / SLUGID_LENGTH < wanted) {
        // fewer nodes than asked for (the graph has fewer rows than its count says): the pages asked for after it
        // start past its end, so they are dropped and the next is asked for where this one ended, as one at a time did
        asked.length = 0;
        next = model.size;
      }
    }
  }

  private addPage(page: NodePage): void {
    const from = this.model.size;
    this.model.addPage(page, this.decoded);
    page.labels.forEach((label, k) => {
      this.labels[from + k] = label;
      if (label) this.labelIndex.set(label, from + k);
    });
  }

  /** Step 2: the handlers. Signals that arrived while loading are applied now, to the loaded model. */
  listen(): void {
    this.listening = true;
    // A signal's argument is whatever its sender wrote (`temporal workflow signal --input`): one of the wrong shape is
    // refused (recorded in status.refused), never thrown, so no workflow task fails on it.
    wf.setHandler(resolutionsSignal, (items) => {
      if (!Array.isArray(items)) return this.refuseSignal(resolutionsSignal.name, 'a list of {taskId, runId, state}');
      this.lastHeard = Date.now();
      this.lastNews = this.lastHeard;
      this.retryRefusedSchedules();
      for (const r of items) if (r !== null && typeof r === 'object') this.model.applyResolution(r.taskId, r.runId, r.state);
      this.dirty = true;
    });
    wf.setHandler(extendedSignal, (req) => {
      if (typeof req?.nodeCount !== 'number') return this.refuseSignal(extendedSignal.name, '{nodeCount}');
      this.wantedNodeCount = Math.max(this.wantedNodeCount, req.nodeCount);
      this.extendedPending = true;
      this.dirty = true;
    });
    wf.setHandler(tasksDefinedSignal, (req) => {
      if (!Array.isArray(req?.taskIds)) return this.refuseSignal(tasksDefinedSignal.name, '{taskIds}');
      for (const id of req.taskIds) if (typeof id === 'string' && !this.model.index.has(id)) this.joinQueue.push(id);
      this.dirty = true;
    });
    wf.setHandler(rerunSignal, (req) => {
      const refusal = this.model.rerunRefusal(this.nodeOf(req ?? {}), nameOf(req ?? {}));
      if (refusal) {
        this.refusals.add(`rerun of ${nameOf(req ?? {})} refused: ${refusal}`);
        wf.log.warn('rerun signal refused', { refusal, request: req });
        return;
      }
      this.rerun(req);
    });
    wf.setHandler(cancelSignal, (req) => {
      if (!this.cancelRequested && typeof req?.reason === 'string' && req.reason) this.cancelReason = req.reason.slice(0, 500);
      this.cancelRequested = true;
      this.dirty = true;
    });
    wf.setHandler(rerunUpdate, (req) => this.rerun(req), {
      validator: (req) => {
        const refusal = this.model.rerunRefusal(this.nodeOf(req ?? {}), nameOf(req ?? {}));
        if (refusal) throw new Error(refusal);
      },
    });
    wf.setHandler(
      amendUpdate,
      (req) => {
        wf.patched(AMEND_PATCH);
        const accepted = applyAmend(this.model, req);
        // no task-graph-extended: the state the amend brings (a blocked graph running again) is announced by the loop
        this.wantedNodeCount = Math.max(this.wantedNodeCount, accepted.nodeCount);
        this.dirty = true;
        return accepted;
      },
      {
        validator: (req) => {
          const refusal = amendRefusal(this.model, req);
          if (refusal) throw new Error(refusal);
        },
      },
    );
    wf.setHandler(
      amendGraphUpdate,
      async (req) => {
        wf.patched(AMEND_GRAPH_PATCH);
        let stored: AmendGraphStored;
        try {
          stored = await bulk.amendGraph(this.taskGraphId, { tasks: req.tasks, ...(req.dryRun ? { dryRun: true } : {}) });
        } catch (err) {
          // the activity's refusal (400, 403, 409 over HTTP) is the update's: its message, not an ActivityFailure around it
          if (err instanceof ActivityFailure && err.cause instanceof ApplicationFailure) {
            throw ApplicationFailure.create({ message: err.cause.message, type: err.cause.type ?? undefined, details: err.cause.details as unknown[], nonRetryable: true });
          }
          throw err;
        }
        let superseded = 0;
        if (!stored.dryRun) {
          const accepted = applyAmend(this.model, { nodeCount: stored.nodeCount, superseded: stored.superseded });
          superseded = accepted.superseded;
          this.wantedNodeCount = Math.max(this.wantedNodeCount, accepted.nodeCount);
          this.amendedNatively = true;
          this.dirty = true;
        }
        return { ...stored, superseded };
      },
      {
        validator: (req) => {
          const refusal = amendGraphRefusal(this.model, req);
          if (refusal) throw new Error(refusal);
        },
      },
    );
    wf.setHandler(reconcileSignal, () => {
      this.reconcileDue = true;
      this.dirty = true;
    });
    wf.setHandler(statusQuery, () => this.status());
    wf.setHandler(explainQuery, (req) => explainModel(this.model, this.labels, Math.min(Math.max(1, req?.limit ?? 1000), 20_000)));
    wf.setHandler(taskQuery, (req) => this.task(req ?? {}));
  }

  private refuseSignal(name: string, wanted: string): void {
    this.refusals.add(`signal ${name} refused: its argument is not ${wanted}`);
    wf.log.warn('signal of the wrong shape refused', { signal: name });
  }

  private nodeOf(req: TaskRef): number | undefined {
    return req.taskId !== undefined ? this.model.index.get(req.taskId) : req.label !== undefined ? this.labelIndex.get(req.label) : undefined;
  }

  private rerun(req: RerunRequest): RerunAccepted {
    const { model } = this;
    const i = this.nodeOf(req) as number;
    const reset = model.manualRerun(i, req.resetDependents === true);
    this.dirty = true;
    return { taskId: model.taskIds[i], resetDependents: reset.map((d) => model.taskIds[d]) };
  }

  private status(): StatusQueryResult {
    return {
      schedulerId: this.meta.schedulerId,
      taskGraphId: this.taskGraphId,
      state: this.model.graphState(),
      routing: this.meta.routing,
      counts: this.model.countsByName(),
      blockedBy: this.model.blockedBy(),
      nodeCount: this.model.size,
      refused: [...this.refusals.list],
    };
  }

  private task(req: TaskRef): TaskQueryResult {
    const { model } = this;
    const i = this.nodeOf(req);
    if (i === undefined) throw new Error(`${nameOf(req)} is not in this task-graph`);
    return {
      taskId: model.taskIds[i],
      idx: i,
      label: this.labels[i] ?? '',
      member: model.member[i] === 1,
      state: NODE_STATE_NAMES[model.state[i]],
      rerunsLeft: model.rerunsLeft[i],
      requires: model.requiresOf(i).map((r) => model.taskIds[r]),
      dependents: model.dependentsOf(i).map((d) => model.taskIds[d]),
      lastRunId: model.lastRun[i],
    };
  }

  /**
   * Step 3: a first run announces `running`. Every state change gets its own message: a graph already blocked when
   * its workflow starts (started late by the missing-workflow sweep, or after its history was lost) announces
   * running here and blocked from the loop, instead of writing `blocked` with a task-graph-running message and
   * never sending task-graph-blocked.
   */
  async announceStart(): Promise<void> {
    if (!this.carried) await this.publish('running', 'task-graph-running');
  }

  /**
   * Step 4: after reconcileAfterMs without news, the loop asks the queue about live tasks. With QUIET_RECONCILE_PATCH
   * only while something is live, backing off while nothing changes.
   */
  reconcileWhenQuiet(): void {
    const ticker = this.quietReconcile ? this.reconcileWhileLive() : this.reconcileEveryInterval();
    ticker.catch(endsWithCancellation);
  }

  private async reconcileEveryInterval(): Promise<never> {
    for (;;) {
      await wf.sleep(this.tuning.reconcileAfterMs);
      if (Date.now() - this.lastHeard >= this.tuning.reconcileAfterMs) {
        this.reconcileDue = true;
        this.dirty = true;
      }
    }
  }

  private async reconcileWhileLive(): Promise<never> {
    const { reconcileAfterMs, reconcileMaxMs } = this.tuning;
    let wait = reconcileAfterMs;
    for (;;) {
      if (!this.anythingToAsk()) {
        // nothing the queue could tell: no timer, so a blocked graph's history stays as it is
        await wf.condition(() => this.anythingToAsk());
        wait = reconcileAfterMs;
      }
      const newsBefore = this.lastNews;
      await wf.sleep(wait);
      if (this.lastNews !== newsBefore) {
        wait = reconcileAfterMs;
      } else if (this.anythingToAsk()) {
        this.reconcileDue = true;
        this.dirty = true;
        wait = Math.min(wait * 2, Math.max(reconcileMaxMs, reconcileAfterMs));
      }
    }
  }

  /** Something live in the queue the graph waits on, that reconciling could find resolved or ready (O(1)). */
  private anythingToAsk(): boolean {
    return this.model.liveMemberCount() > 0 || this.model.unresolvedExternalCount() > 0 || this.refusedSchedules.length > 0;
  }

  /** Step 5, until the graph ends or the run continues as new: act on the news, dispatch, announce changes. */
  async loop(): Promise<TaskGraphResult> {
    const all = !this.lean;
    for (;;) {
      if (all || !this.dirty) await wf.condition(() => this.dirty);
      this.dirty = false;
      this.showProgress();
      if (all || this.cancelPending()) await this.cancelIfRequested();
      if (all || this.tasksToJoin()) await this.joinDefinedTasks();
      if (all || this.nodesToLoad()) await this.loadNewNodes();
      if (all || this.reconcileDue) await this.reconcileIfDue();
      // Near the history limit: stop dispatching, drain what is in flight, then continue-as-new.
      const historyFull = shouldContinueAsNew(wf.workflowInfo(), this.loadedAt, this.tuning.maxHistoryEvents);
      if (!historyFull) this.dispatch();

      const state = this.model.graphState();
      if (state !== this.publishedState && (state === 'running' || state === 'blocked')) {
        await this.publish(state, state === 'blocked' ? 'task-graph-blocked' : 'task-graph-running');
      }
      if ((state === 'finished' || state === 'canceled') && this.inFlight === 0) {
        if (await this.end(state)) return { taskGraphId: this.taskGraphId, state };
        continue;
      }
      if (historyFull && this.drained() && (all || this.quietEnoughToContinue())) return this.continueAsNew();
    }
  }

  // What each step of the loop has to do; the loop awaits a step only when it has work (LEAN_LOOP_PATCH).
  private cancelPending(): boolean {
    return this.cancelRequested && !this.model.canceled;
  }

  private tasksToJoin(): boolean {
    return this.joinQueue.length > 0;
  }

  private nodesToLoad(): boolean {
    return this.wantedNodeCount > this.model.size;
  }

  private async cancelIfRequested(): Promise<void> {
    if (!this.cancelPending()) return;
    this.model.canceled = true;
    const ids = this.model.unresolvedMembers().map((i) => this.model.taskIds[i]);
    await hot(`cancel ${ids.length} task(s)`).cancelTasks(this.taskGraphId, ids);
  }

  /** Tasks of the group defined in the queue since (queue-level graphs). */
  private async joinDefinedTasks(): Promise<void> {
    if (!this.tasksToJoin()) return;
    const ids = this.joinQueue.splice(0, this.joinQueue.length);
    const { nodeCount } = await bulk.joinTasks(this.taskGraphId, ids);
    this.wantedNodeCount = Math.max(this.wantedNodeCount, nodeCount);
  }

  private async loadNewNodes(): Promise<void> {
    if (!this.nodesToLoad()) return;
    const before = this.model.memberCount;
    await this.loadNodesUpTo(this.wantedNodeCount);
    // the state as last announced: a change the new nodes cause gets its own message from the loop
    if (this.extendedPending && this.model.memberCount > before) await this.publish(this.publishedState ?? 'running', 'task-graph-extended');
    this.extendedPending = false;
    this.meta = { ...this.meta, nodeCount: this.model.size };
  }

  private async reconcileIfDue(): Promise<void> {
    if (!this.reconcileDue) return;
    const { model } = this;
    this.reconcileDue = false;
    this.retryRefusedSchedules();
    this.lastHeard = Date.now();
    const live = [...model.liveMembers(), ...model.unresolvedExternals()].slice(0, 20_000).map((i) => model.taskIds[i]);
    const result = await hot(`reconcile ${live.length} task(s)`).reconcile(this.taskGraphId, live);
    let changed = false;
    for (const r of result.resolutions) changed = model.applyResolution(r.taskId, r.runId, r.state) || changed;
    // what a reconcile finds is news: the next one comes reconcileAfterMs after it, not after the back-off
    if (changed) this.lastNews = Date.now();
    this.wantedNodeCount = Math.max(this.wantedNodeCount, result.nodeCount);
    if (result.nodeCount > model.size) this.dirty = true;
  }

  private retryRefusedSchedules(): void {
    this.model.dispatchFailed(this.refusedSchedules.splice(0, this.refusedSchedules.length));
  }

  /** Ready tasks and reruns in batches, up to maxDispatchInFlight activities at once. */
  private dispatch(): void {
    while (!this.model.canceled && this.model.hasDispatchable() && this.inFlight < this.tuning.maxDispatchInFlight) {
      const items = this.model.takeDispatch(this.tuning.dispatchBatch);
      if (items.length === 0) break;
      this.inFlight++;
      // One `then` with both arms, not then + finally: three promises fewer for the SDK's hook (LEAN_LOOP_PATCH). Neither
      // arm issues a command, and the loop resumes only after the activation's microtasks, so nothing else moves.
      const returned = () => {
        this.inFlight--;
        this.dirty = true;
      };
      hot(describe(items))
        .dispatchTasks(this.taskGraphId, items)
        .then(
          (result) => {
            try {
              this.dispatched(items, result);
            } finally {
              returned();
            }
          },
          (err: unknown) => {
            wf.log.error('dispatch failed; will retry', { error: String(err) });
            this.model.dispatchFailed(items);
            returned();
          },
        );
    }
  }

  private dispatched(items: DispatchItem[], result: DispatchResult): void {
    const { model } = this;
    const unready = new Set(result.unready ?? []);
    model.dispatched(unready.size ? items.filter((i) => !unready.has(i.taskId)) : items);
    this.refusedSchedules.push(...items.filter((i) => unready.has(i.taskId) && i.kind === 'schedule'));
    for (const r of result.resolutions) model.applyResolution(r.taskId, r.runId, r.state);
    for (const r of result.refused ?? []) {
      if (!model.rerunRefused(r.taskId, r.state)) continue;
      this.refusals.add(`rerun of task ${r.taskId} refused by the queue: ${r.reason}`);
      wf.log.warn('rerun refused by the queue', { taskId: r.taskId, reason: r.reason });
    }
    for (const taskId of unready) {
      // The queue's stored state disagrees with the model (a forged or stale resolution): nothing was started.
      if (this.refusedSeen.has(taskId)) continue;
      this.refusedSeen.add(taskId);
      this.refusals.add(`task ${taskId} not dispatched: the queue does not show its dependencies resolved, or it is not a member`);
      wf.log.warn('dispatch refused by the queue', { taskId });
    }
  }

  private showProgress(): void {
    const { model } = this;
    const parts = Object.entries(model.countsByName()).map(([k, v]) => `${k} ${v}`);
    const blocked = model.blockedBy();
    const lastRefused = this.refusals.last;
    wf.setCurrentDetails(
      [
        `**${model.graphState()}** · ${model.memberCount} tasks · ${parts.join(' · ')}`,
        blocked.length ? `blocked by ${blocked.slice(0, 5).join(', ')}${blocked.length > 5 ? ` (+${blocked.length - 5})` : ''}` : '',
        lastRefused !== undefined ? `last refused signal: ${lastRefused}` : '',
      ]
        .filter(Boolean)
        .join('\n'),
    );
  }

  private async publish(state: GraphState, kind: string, reason?: string): Promise<PublishResult> {
    const seq = this.messageSeq[kind] ?? 0;
    const result = await hot(`${kind} #${seq}`).publishGraphEvent(this.taskGraphId, {
      kind,
      seq,
      state,
      blockedBy: this.model.blockedBy(),
      knownNodeCount: this.model.size,
      ...(reason !== undefined ? { reason } : {}),
    });
    if (result.ended === 'canceled' && !this.model.canceled) {
      // a reset run of a canceled graph's workflow: the graph stays canceled (its tasks were canceled), and the run ends
      this.model.canceled = true;
      this.cancelRequested = true;
      this.dirty = true;
    }
    if (result.published) {
      this.messageSeq[kind] = seq + 1;
      this.publishedState = state;
      wf.upsertSearchAttributes([
        { key: SEARCH_ATTRIBUTES.state, value: state },
        { key: SEARCH_ATTRIBUTES.schedulerId, value: this.meta.schedulerId },
      ]);
    }
    return result;
  }

  /**
   * Announces the end. False when Postgres holds nodes this run has not loaded (an extend raced the last
   * completion): the loop loads them and goes on.
   */
  private async end(state: 'finished' | 'canceled'): Promise<boolean> {
    const result = await this.publish(state, state === 'finished' ? 'task-graph-finished' : 'task-graph-canceled', state === 'canceled' ? this.cancelReason : undefined);
    if (!result.published) {
      this.wantedNodeCount = Math.max(this.wantedNodeCount, result.nodeCount);
      this.dirty = true;
      return false;
    }
    this.showProgress();
    await wf.condition(wf.allHandlersFinished);
    // an amendGraph update that came while the graph ended stored new nodes (its activity found the graph finished
    // and made it running again): this run goes on with them (only runs with such an update get here)
    if (this.amendedNatively && this.nodesToLoad()) {
      this.dirty = true;
      return false;
    }
    return true;
  }

  /**
   * A Temporal cancellation of the workflow (the Web UI's Cancel, `temporal workflow cancel`; TEMPORAL_CANCEL_PATCH in
   * taskGraph.ts), called in a non-cancellable scope once the cancellation stopped the run: ends the graph as the
   * `cancel` signal does. The structure is loaded if the cancellation came while it loaded, the dispatches in flight
   * return (so none schedules or reruns a task after the cancel below), the unresolved members are canceled in the
   * queue, and `canceled` is published once (its message numbered after this run's others, so a retried activity
   * repeats its id) with who asked, read from the workflow's history. A graph the run found all completed is
   * published finished instead, and one that already announced its end is left as it is.
   */
  async endCanceledByTemporal(): Promise<void> {
    if (!this.loaded) await this.load();
    if (!this.listening) this.listen();
    if (this.publishedState === 'finished' || this.publishedState === 'canceled') return;
    await wf.condition(() => this.inFlight === 0);
    if (this.model.graphState() === 'finished' && (await this.publish('finished', 'task-graph-finished')).published) {
      this.showProgress();
      return;
    }
    this.model.canceled = true;
    this.cancelRequested = true;
    const ids = this.model.unresolvedMembers().map((i) => this.model.taskIds[i]);
    await hot(`cancel ${ids.length} task(s)`).cancelTasks(this.taskGraphId, ids);
    let origin: { identity?: string; reason?: string } = {};
    try {
      origin = await lookup.cancelRequestOf(this.taskGraphId, wf.workflowInfo().runId);
    } catch (err) {
      wf.log.warn('who canceled the workflow could not be read from its history', { error: String(err) });
    }
    const reason = `canceled through Temporal${origin.identity ? ` by ${origin.identity}` : ''}${origin.reason ? `: ${origin.reason}` : ''}`;
    await this.publish('canceled', 'task-graph-canceled', this.cancelReason ?? reason.slice(0, 500));
    this.showProgress();
    await wf.condition(wf.allHandlersFinished);
  }

  /**
   * With the patch, a drained run continues as new once none of its tasks is live in the queue, or continueQuietWaitMs after
   * it first could, whichever comes first. The workflow task that continues as new fails when a signal arrives while
   * it runs, and the next one replays the whole run: on the 300,000-task graph 13-21 s for 33 MB of history, over the
   * 10 s workflow task timeout, so it failed again until the resolutions stopped (the graph stood still 20-111 s at each
   * continue-as-new, docs/bench-journal/2026-11-26.md). Dispatch has stopped by then, so the live tasks are the last to resolve; the
   * bound keeps a long task from holding back the rest of the graph.
   */
  private quietEnoughToContinue(): boolean {
    if (this.model.liveMemberCount() === 0) return true;
    if (this.quietWaitFrom === undefined) {
      this.quietWaitFrom = Date.now();
      // wakes the loop when the wait is over, whether or not a signal does
      void wf
        .sleep(this.tuning.continueQuietWaitMs)
        .then(() => {
          this.dirty = true;
        })
        .catch(endsWithCancellation);
    }
    return Date.now() - this.quietWaitFrom >= this.tuning.continueQuietWaitMs;
  }

  /** Nothing in flight and nothing known that is not loaded yet: the state can be carried. */
  private drained(): boolean {
    return this.inFlight === 0 && !this.tasksToJoin() && !this.nodesToLoad();
  }

  /** The compact state is carried; the structure is reloaded by the next run. */
  private async continueAsNew(): Promise<never> {
    await wf.condition(wf.allHandlersFinished);
    const next: TaskGraphInput = {
      taskGraphId: this.taskGraphId,
      tuning: this.input.tuning,
      carried: {
        ...this.model.carry(),
        publishedState: this.publishedState,
        messageSeq: this.messageSeq,
        runs: (this.carried?.runs ?? 0) + 1,
        rejected: this.refusals.list,
      },
    };
    return wf.continueAsNew<TaskGraphWorkflow>(next);
  }
}

/** A timer of the run that a Temporal cancellation stopped ends quietly (the run ends the graph: endCanceledByTemporal). */
function endsWithCancellation(err: unknown): void {
  if (!wf.isCancellation(err)) throw err;
}

const nameOf = (req: TaskRef) => (req.taskId !== undefined ? `task ${req.taskId}` : `label ${JSON.stringify(req.label)}`);
