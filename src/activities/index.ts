import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import { Context } from '@temporalio/activity';
import { deploymentIdOf } from '../db/deployment.js';
import { LazyTemporalClient } from '../temporal/connection.js';
import type { Config } from '../config.js';
import { withTransaction } from '../db/pool.js';
import { enqueueMessages } from '../exchanges/outbox.js';
import type { SchedulerExchange } from '../exchanges/exchanges.js';
import { scheduleTasks } from '../queue/scheduleTasks.js';
import { rerunRefusal, rerunTasks } from '../queue/rerunTasks.js';
import { latestRuns, runResolution } from '../queue/latestRuns.js';
import { cancelTasks as cancelQueueTasks } from '../queue/cancelTasks.js';
import { TgsError } from '../errors.js';
import type { DispatchItem } from '../workflows/graphModel.js';
import { DEPLOYMENT_MEMO, GRAPH_OF_ANOTHER_DEPLOYMENT, INVALID_TASK_GRAPH, type AmendGraphRequest, type GraphMeta, type GraphState, type NodePage, type Resolution, type TaskGraphInput } from '../workflows/contract.js';
import { isResolved } from '../taskStates.js';
import { ensureQueueGraph, getGraph, memberTaskIds, dispatchMembers, graphMeta, joinQueueTasks, loadNodePage, recordGraphState, setRerunsLeft } from '../scheduler/graphStore.js';
import { readyTasks } from '../queue/readiness.js';
import { dispatchInOne } from './dispatchInOne.js';
import { temporalGraphAuthorizer } from '../scheduler/temporalNativeAuth.js';
import { graphMessage } from '../scheduler/messages.js';
import { createTaskGraph } from '../scheduler/createTaskGraph.js';
import type { Logger } from '../log.js';
import { observeHops } from '../observability/hops.js';
import { withHeartbeat } from './heartbeat.js';
import { resolveReadyFromCache } from '../taskCache/dispatch.js';
import { resolveReadyByCutoff } from '../scheduler/earlyCutoff.js';
import { hookActivities } from './hooks.js';
import { cancelRequestOf } from './workflowHistory.js';
import type { Activities, AmendGraphStored, DispatchResult, PublishResult, RefusedRerun } from '../workflows/activityContract.js';
import { amendTaskGraph } from '../scheduler/amendTaskGraph.js';

export type { Activities, DispatchResult, PublishResult, RefusedRerun } from '../workflows/activityContract.js';

export interface ActivityDeps {
  config: Config;
  pool: pg.Pool;
  /** the scheduler worker's logger (src/log.ts); none: activities log nothing (tests) */
  log?: Logger;
}

/** Resolutions of the latest runs of these tasks that are resolved. */
async function resolvedLatestRuns(db: pg.Pool | pg.PoolClient, taskIds: string[]): Promise<Resolution[]> {
  return (await latestRuns(db, taskIds, { resolved: true })).flatMap((row) => runResolution(row) ?? []);
}

/** The scheduler's activities. Every one is idempotent: Temporal runs activities at least once. */
export function createActivities(deps: ActivityDeps): Activities {
  const { config, pool } = deps;
  // connected only when a graph is missing here and its workflow's memo must be read
  const temporal = new LazyTemporalClient(config);

  /**
   * The graph is not in this database. Its workflow's memo says whose it is (docs/temporal.md § Several deployments on
   * one namespace): this deployment's, or a workflow without the memo (started before it existed, or natively without
   * a deployment id), really is missing and fails for good with `message`; another deployment's gets a retryable
   * failure saying so, and the retry goes back to the shared task queue, where the owner's worker can take it.
   */
  const missingGraph = async (taskGraphId: string, message: string): Promise<never> => {
    const mine = await deploymentIdOf(pool);
    const { workflowExecution } = Context.current().info;
    const description = workflowExecution && (await (await temporal.get()).workflow.getHandle(workflowExecution.workflowId, workflowExecution.runId).describe());
    const owner = description ? description.memo?.[DEPLOYMENT_MEMO] : undefined;
    if (typeof owner === 'string' && owner !== mine) {
      const text =
        `task-graph ${taskGraphId} belongs to tgs deployment ${owner}, not to this worker's (${mine}, whose database does not hold it): ` +
        `two deployments share Temporal namespace ${config.temporalNamespace} and task queue ${config.temporalTaskQueue}; retried for the owner's worker. ` +
        'Give each deployment its own TGS_TASK_QUEUE or TEMPORAL_NAMESPACE (docs/deployments.md § Several deployments)';
      deps.log?.warn({ taskGraphId, owner, deploymentId: mine }, text);
      throw ApplicationFailure.retryable(text, GRAPH_OF_ANOTHER_DEPLOYMENT);
    }
    throw ApplicationFailure.nonRetryable(message, INVALID_TASK_GRAPH);
  };

  return {
    ...hookActivities(deps),
    /**
     * Temporal-native start: validate and store the graph given as workflow input, acting as the client
     * TGS_TEMPORAL_CLIENT_ID with the same scope check as PUT /task-graph (nothing is written when it fails).
     */
    createGraph: (taskGraphId: string, input: TaskGraphInput): Promise<void> => withHeartbeat(async () => {
      const { tuning: _tuning, carried: _carried, taskGraphId: _id, origin: _origin, ...graph } = input;
      try {
        const authorize = await temporalGraphAuthorizer(config, pool);
        await createTaskGraph({ config, pool }, taskGraphId, graph, { authorize });
      } catch (err) {
        if (err instanceof TgsError && err.status < 500) {
          throw ApplicationFailure.nonRetryable(err.message, INVALID_TASK_GRAPH, { code: err.code, ...err.details });
        }
        throw err;
      }
    }),

    /** Temporal-native amend: as PUT /task-graph/<id>/amend, acting as TGS_TEMPORAL_CLIENT_ID (the same check). */
    amendGraph: (taskGraphId: string, request: AmendGraphRequest): Promise<AmendGraphStored> => withHeartbeat(async () => {
      try {
        const authorize = await temporalGraphAuthorizer(config, pool);
        const result = await amendTaskGraph({ config, pool }, taskGraphId, { tasks: request?.tasks }, { authorize, who: `temporal:${config.temporalClientId}`, dryRun: request?.dryRun === true });
        return {
          dryRun: result.dryRun,
          ...(result.seq !== undefined ? { amend: result.seq } : {}),
          state: result.graph.state,
          classification: result.summary,
          tasks: result.tasks,
          mayBeKept: result.mayBeKept,
          superseded: result.superseded,
          nodeCount: result.graph.node_count,
        };
      } catch (err) {
        if (err instanceof TgsError && err.status < 500) throw ApplicationFailure.nonRetryable(err.message, INVALID_TASK_GRAPH, { code: err.code, ...err.details });
        throw err;
      }
    }),

    loadGraph: (taskGraphId: string, createForQueue: boolean): Promise<GraphMeta> => withHeartbeat(async () => {
      let row = await getGraph(pool, taskGraphId);
      if (!row && createForQueue) {
        try {
          await ensureQueueGraph(pool, taskGraphId);
        } catch (err) {
          if (err instanceof TgsError && err.status < 500) throw ApplicationFailure.nonRetryable(err.message, INVALID_TASK_GRAPH, { code: err.code });
          throw err;
        }
        row = await getGraph(pool, taskGraphId);
      }
      if (!row) {
        return missingGraph(
          taskGraphId,
          `task-graph ${taskGraphId} does not exist: create it with PUT /api/scheduler/v1/task-graph/${taskGraphId} or start the workflow with the graph as input`,
        );
      }
      return graphMeta(row);
    }),

    loadNodes: (taskGraphId: string, fromIdx: number, limit: number, withQueueState: boolean): Promise<NodePage> =>
      withHeartbeat(async () => {
        const page = await loadNodePage(pool, taskGraphId, fromIdx, limit, withQueueState);
        // an empty page of a graph this database does not hold: another deployment's workflow (or a vanished graph)
        if (page.taskIds.length === 0 && !(await getGraph(pool, taskGraphId))) return missingGraph(taskGraphId, `task-graph ${taskGraphId} vanished`);
        return page;
      }),

    joinTasks: (taskGraphId: string, taskIds: string[]): Promise<{ nodeCount: number }> =>
      withHeartbeat(async () => ({ nodeCount: await withTransaction(pool, (client) => joinQueueTasks(client, taskGraphId, taskIds)) })),

    /**
     * Schedules ready tasks and reruns failed/reset ones, in one transaction. Acts only on members of the graph,
     * and schedules only tasks whose dependencies the queue's stored state shows resolved: anyone who can signal
     * the workflow (or schedule this activity) can claim anything, so nothing here trusts the workflow's model.
     * A batch of schedules alone goes in one statement (dispatchInOne) unless a ready node needs this general path.
     */
    async dispatchTasks(taskGraphId: string, items: DispatchItem[]): Promise<DispatchResult> {
      const taskIds = items.map((i) => i.taskId);
      /** After the commit: the log lines and hop observations of the tasks this call made pending with their first run. */
      const announcePending = (becamePending: string[], hops: Parameters<typeof observeHops>[0]) => {
        if (becamePending.length === 0) return;
        deps.log?.info({ taskGraphId, scheduled: becamePending.length, ...(becamePending.length === 1 ? { taskId: becamePending[0] } : {}) }, 'tasks pending');
        deps.log?.debug({ taskGraphId, taskIds: becamePending }, 'tasks pending (ids)');
        observeHops(hops);
      };
      if (items.every((i) => i.kind === 'schedule')) {
        // Four round trips fewer than the general path. The hop scenario (a chain of 200; 5-6 runs each alternated with
        // the general path alone, 2 shared cores): hop p50 24.9 → 22.5 ms at load average 0.4-6, 33.4 → 26.6 at 7-17;
        // the activity alone p50 1.35-1.66 → 0.85-1.05 ms (docs/bench-journal/2026-11-29.md).
        const one = await dispatchInOne(pool, taskGraphId, taskIds);
        if (one) {
          announcePending(one.firstRuns.map((r) => r.taskId), one.firstRuns.map((r) => ({ scheduled: r.scheduled, latestRequirementResolved: one.ready.get(r.taskId) })));
          const unready = taskIds.filter((id) => !one.ready.has(id));
          return { resolutions: one.resolutions, ...(unready.length ? { unready } : {}) };
        }
      }
      const refused: RefusedRerun[] = [];
      const unready: string[] = [];
      let becamePending: string[] = [];
      let hops: Parameters<typeof observeHops>[0] = [];
      await withTransaction(pool, async (client) => {
        const { members, cached, cutoff } = await dispatchMembers(client, taskGraphId, taskIds);
        const wanted = items.filter((i) => i.kind === 'schedule').map((i) => i.taskId);
        const ready = await readyTasks(client, wanted.filter((id) => members.has(id)));
        const readyIds = wanted.filter((id) => ready.has(id));
        unready.push(...wanted.filter((id) => !ready.has(id)));
        // cached nodes found in the cache are resolved from it, then an amend's dependents the early cutoff keeps
        // (src/scheduler/earlyCutoff.ts); their resolutions come back below. Each is given every ready task, as each
        // locks them all in taskId order before the schedule does
        const fromCache = readyIds.some((id) => cached.has(id)) ? await resolveReadyFromCache(client, config, taskGraphId, readyIds, new Date()) : new Set<string>();
        const kept = readyIds.some((id) => cutoff.has(id)) ? await resolveReadyByCutoff(client, config, taskGraphId, readyIds, fromCache, new Date()) : new Set<string>();
        const toSchedule = fromCache.size > 0 || kept.size > 0 ? readyIds.filter((id) => !fromCache.has(id) && !kept.has(id)) : readyIds;
        if (toSchedule.length > 0) {
          const statuses = await scheduleTasks(client, config, toSchedule);
          const firstRuns = statuses.filter((s) => s.state === 'pending' && s.runs.length === 1);
          becamePending = firstRuns.map((s) => s.taskId);
          hops = firstRuns.map((s) => ({ scheduled: s.runs[0].scheduled, latestRequirementResolved: ready.get(s.taskId) }));
        }
        const reruns = items.filter((i) => i.kind === 'rerun' && members.has(i.taskId));
        unready.push(...items.filter((i) => i.kind === 'rerun' && !members.has(i.taskId)).map((i) => i.taskId));
        if (reruns.length > 0) {
          // Rerun only tasks whose latest run is still the one the workflow saw resolve: a retry of this
          // activity, or a rerun someone else made, must not add a second run.
          const rows = await latestRuns(client, reruns.map((r) => r.taskId), { forUpdate: true });
          const latest = new Map(rows.map((r) => [r.task_id, r]));
          const now = new Date();
          // a canceled graph reruns nothing (a reset run of its workflow may replay a rerun from before the cancel)
          const canceled = (await getGraph(client, taskGraphId))?.state === 'canceled';
          const due = reruns.filter((r) => {
            const row = latest.get(r.taskId);
            if (row === undefined || row.run_id !== r.expectedRunId || row.state === null || !isResolved(row.state)) return false;
            if (canceled) {
              refused.push({ taskId: r.taskId, state: row.state, reason: 'the task-graph is canceled' });
              return false;
            }
            // The queue would skip these silently; the workflow must hear it, or the node would wait forever.
            const reason = rerunRefusal({ ...row, runCount: row.run_id + 1 }, now, { automatic: r.rerunsLeft !== undefined });
            if (reason) refused.push({ taskId: r.taskId, state: row.state, reason });
            return reason === undefined;
          });
          if (due.length > 0) await rerunTasks(client, config, due.map((r) => r.taskId));
          await setRerunsLeft(client, taskGraphId, reruns.flatMap((r) => (r.rerunsLeft !== undefined ? [{ idx: r.idx, taskId: r.taskId, rerunsLeft: r.rerunsLeft }] : [])));
        }
      });
      announcePending(becamePending, hops);
      // Anything already resolved again (a very fast worker, or a duplicate activity) is reported back.
      return {
        resolutions: await resolvedLatestRuns(pool, taskIds),
        ...(refused.length ? { refused } : {}),
        ...(unready.length ? { unready } : {}),
      };
    },

    /**
     * Records the graph state and writes its scheduler exchange message in one transaction. A graph
     * that gained nodes the workflow has not loaded yet is not declared finished.
     */
    async publishGraphEvent(
      taskGraphId: string,
      event: { kind: string; seq: number; state: GraphState; blockedBy: string[]; knownNodeCount: number; reason?: string },
    ): Promise<PublishResult> {
      const result = await withTransaction(pool, async (client) => {
        const row = await getGraph(client, taskGraphId, true);
        if (!row) return undefined;
        if (event.state === 'finished' && row.node_count > event.knownNodeCount) {
          return { published: false, nodeCount: row.node_count };
        }
        if ((row.state === 'finished' || row.state === 'canceled') && event.state !== row.state) {
          // An ended graph stays ended: a reset run of its workflow replays states the graph already left
          // (docs/temporal.md § What Temporal's own operations do to a graph). Nothing is written; the run hears it.
          return { published: true, nodeCount: row.node_count, ended: row.state };
        }
        await recordGraphState(client, taskGraphId, event.state, event.blockedBy, event.reason);
        if (row.origin === 'graph') {
          const message = graphMessage(
            config,
            { taskGraphId, schedulerId: row.scheduler_id, routing: row.routing, routes: row.routes, state: event.state, taskCount: row.task_count, resumes: row.resumes },
            event.kind as SchedulerExchange,
            event.seq,
            event.blockedBy,
          );
          await enqueueMessages(client, [message]);
        }
        return { published: true, nodeCount: row.node_count };
      });
      // outside the transaction: its session is given back before Temporal is asked (PGlite has one)
      return result ?? missingGraph(taskGraphId, `task-graph ${taskGraphId} vanished`);
    },

    /** Cancels unresolved member tasks of the graph; other taskIds (a forged activity input) are ignored. */
    async cancelTasks(taskGraphId: string, taskIds: string[]): Promise<void> {
      for (let i = 0; i < taskIds.length; i += 5000) {
        const chunk = taskIds.slice(i, i + 5000);
        await withTransaction(pool, async (client) => {
          const members = await memberTaskIds(client, taskGraphId, chunk);
          await cancelQueueTasks(client, config, chunk.filter((id) => members.has(id)));
        });
      }
    },

    cancelRequestOf,

    /** What the queue knows about tasks the workflow has not heard from: lost messages are recovered here. */
    async reconcile(taskGraphId: string, taskIds: string[]): Promise<{ resolutions: Resolution[]; nodeCount: number }> {
      const row = await getGraph(pool, taskGraphId);
      return { resolutions: await resolvedLatestRuns(pool, taskIds), nodeCount: row?.node_count ?? 0 };
    },
  };
}
