import type pg from 'pg';
import { ApplicationFailure } from '@temporalio/common';
import type { Config } from '../config.js';
import { prepared, withTransaction } from '../db/pool.js';
import { enqueueMessages } from '../exchanges/outbox.js';
import type { SchedulerExchange } from '../exchanges/exchanges.js';
import { scheduleTasks } from '../queue/scheduleTasks.js';
import { MAX_RUNS, rerunTasks } from '../queue/rerunTasks.js';
import { cancelTasks as cancelQueueTasks } from '../queue/cancelTasks.js';
import { TgsError } from '../errors.js';
import type { DispatchItem } from '../workflows/graphState.js';
import type { GraphMeta, GraphState, NodePage, Resolution, ResolvedState, TaskGraphInput } from '../workflows/contract.js';
import { ensureQueueGraph, getGraph, graphMeta, joinQueueTasks, loadNodePage } from '../scheduler/graphStore.js';
import { graphMessage } from '../scheduler/messages.js';
import { createTaskGraph } from '../scheduler/createTaskGraph.js';

export interface ActivityDeps {
  config: Config;
  pool: pg.Pool;
}

export interface DispatchResult {
  /** tasks found already resolved in a newer run than the workflow knew (a retried activity, a manual queue action) */
  resolutions: Resolution[];
  /** reruns the queue refuses (deadline passed, 50 runs): the node keeps its resolution and says why */
  refused?: RefusedRerun[];
}

export interface RefusedRerun {
  taskId: string;
  /** the queue state the task stays in */
  state: ResolvedState;
  reason: string;
}

export interface PublishResult {
  published: boolean;
  nodeCount: number;
}

const RESOLVED = new Set(['completed', 'failed', 'exception']);

/** Resolutions of the latest runs of these tasks that are resolved. */
async function resolvedLatestRuns(db: pg.Pool | pg.PoolClient, taskIds: string[]): Promise<Resolution[]> {
  if (taskIds.length === 0) return [];
  const { rows } = await db.query<{ task_id: string; state: string; latest: number; reason: string | null }>(
    prepared(
      `SELECT task_id, state, jsonb_array_length(runs) - 1 AS latest, runs -> -1 ->> 'reasonResolved' AS reason
       FROM tasks WHERE task_id = ANY($1) AND state IN ('completed', 'failed', 'exception')`,
      [taskIds],
    ),
  );
  return rows.map((r) => ({
    taskId: r.task_id,
    runId: r.latest,
    state: r.state as ResolvedState,
    ...(r.reason ? { reasonResolved: r.reason } : {}),
  }));
}

/** The scheduler's activities. Every one is idempotent: Temporal runs activities at least once. */
export function createActivities(deps: ActivityDeps) {
  const { config, pool } = deps;
  return {
    /** Temporal-native start: validate and store the graph given as workflow input. */
    async createGraph(taskGraphId: string, input: TaskGraphInput): Promise<void> {
      const { tuning: _tuning, carried: _carried, taskGraphId: _id, origin: _origin, ...graph } = input;
      try {
        await createTaskGraph({ config, pool }, taskGraphId, graph);
      } catch (err) {
        if (err instanceof TgsError && err.status < 500) {
          throw ApplicationFailure.nonRetryable(err.message, 'InvalidTaskGraph', { code: err.code });
        }
        throw err;
      }
    },

    async loadGraph(taskGraphId: string, createForQueue: boolean): Promise<GraphMeta> {
      let row = await getGraph(pool, taskGraphId);
      if (!row && createForQueue) {
        await ensureQueueGraph(pool, taskGraphId);
        row = await getGraph(pool, taskGraphId);
      }
      if (!row) {
        throw ApplicationFailure.nonRetryable(
          `task-graph ${taskGraphId} does not exist: create it with PUT /api/scheduler/v1/task-graph/${taskGraphId} or start the workflow with the graph as input`,
          'InvalidTaskGraph',
        );
      }
      return graphMeta(row);
    },

    async loadNodes(taskGraphId: string, fromIdx: number, limit: number, withQueueState: boolean): Promise<NodePage> {
      return loadNodePage(pool, taskGraphId, fromIdx, limit, withQueueState);
    },

    async joinTasks(taskGraphId: string, taskIds: string[]): Promise<{ nodeCount: number }> {
      const nodeCount = await withTransaction(pool, (client) => joinQueueTasks(client, taskGraphId, taskIds));
      return { nodeCount };
    },

    /** Schedules ready tasks and reruns failed/reset ones, in one transaction. */
    async dispatchTasks(taskGraphId: string, items: DispatchItem[]): Promise<DispatchResult> {
      const taskIds = items.map((i) => i.taskId);
      const refused: RefusedRerun[] = [];
      await withTransaction(pool, async (client) => {
        const toSchedule = items.filter((i) => i.kind === 'schedule').map((i) => i.taskId);
        if (toSchedule.length > 0) await scheduleTasks(client, config, toSchedule);
        const reruns = items.filter((i) => i.kind === 'rerun');
        if (reruns.length > 0) {
          // Rerun only tasks whose latest run is still the one the workflow saw resolve: a retry of this
          // activity, or a rerun someone else made, must not add a second run.
          const { rows } = await client.query<{ task_id: string; latest: number; state: string; deadline: Date }>(
            `SELECT task_id, jsonb_array_length(runs) - 1 AS latest, state, deadline FROM tasks WHERE task_id = ANY($1) FOR UPDATE`,
            [reruns.map((r) => r.taskId)],
          );
          const latest = new Map(rows.map((r) => [r.task_id, r]));
          const now = new Date();
          const due = reruns.filter((r) => {
            const row = latest.get(r.taskId);
            if (row === undefined || row.latest !== r.expectedRunId || !RESOLVED.has(row.state)) return false;
            // The queue would skip these silently; the workflow must hear it, or the node would wait forever.
            const reason = row.deadline <= now
              ? `task ${r.taskId} is past its deadline (${row.deadline.toISOString()})`
              : row.latest + 1 >= MAX_RUNS ? `task ${r.taskId} has reached ${MAX_RUNS} runs` : undefined;
            if (reason) refused.push({ taskId: r.taskId, state: row.state as ResolvedState, reason });
            return reason === undefined;
          });
          if (due.length > 0) await rerunTasks(client, config, due.map((r) => r.taskId));
          const counted = reruns.filter((r) => r.rerunsLeft !== undefined);
          if (counted.length > 0) {
            await client.query(
              `UPDATE graph_nodes n SET reruns_left = v.reruns_left
               FROM jsonb_to_recordset($2::jsonb) AS v(idx int, reruns_left int)
               WHERE n.task_graph_id = $1 AND n.idx = v.idx`,
              [taskGraphId, JSON.stringify(counted.map((r) => ({ idx: r.idx, reruns_left: r.rerunsLeft })))],
            );
          }
        }
      });
      // Anything already resolved again (a very fast worker, or a duplicate activity) is reported back.
      return { resolutions: await resolvedLatestRuns(pool, taskIds), ...(refused.length ? { refused } : {}) };
    },

    /**
     * Records the graph state and writes its scheduler exchange message in one transaction. A graph
     * that gained nodes the workflow has not loaded yet is not declared finished.
     */
    async publishGraphEvent(
      taskGraphId: string,
      event: { kind: string; seq: number; state: GraphState; blockedBy: string[]; knownNodeCount: number },
    ): Promise<PublishResult> {
      return withTransaction(pool, async (client) => {
        const row = await getGraph(client, taskGraphId, true);
        if (!row) throw ApplicationFailure.nonRetryable(`task-graph ${taskGraphId} vanished`, 'InvalidTaskGraph');
        if (event.state === 'finished' && row.node_count > event.knownNodeCount) {
          return { published: false, nodeCount: row.node_count };
        }
        await client.query(
          'UPDATE task_graphs SET state = $2, blocked_by = $3, updated = now() WHERE task_graph_id = $1',
          [taskGraphId, event.state, event.blockedBy.slice(0, 1000)],
        );
        if (row.origin === 'graph') {
          const message = graphMessage(
            config,
            { taskGraphId, schedulerId: row.scheduler_id, routing: row.routing, state: event.state, taskCount: row.task_count },
            event.kind as SchedulerExchange,
            event.seq,
            event.blockedBy,
          );
          await enqueueMessages(client, [message]);
        }
        return { published: true, nodeCount: row.node_count };
      });
    },

    async cancelTasks(_taskGraphId: string, taskIds: string[]): Promise<void> {
      for (let i = 0; i < taskIds.length; i += 5000) {
        const chunk = taskIds.slice(i, i + 5000);
        await withTransaction(pool, (client) => cancelQueueTasks(client, config, chunk));
      }
    },

    /** What the queue knows about tasks the workflow has not heard from: lost messages are recovered here. */
    async reconcile(taskGraphId: string, taskIds: string[]): Promise<{ resolutions: Resolution[]; nodeCount: number }> {
      const row = await getGraph(pool, taskGraphId);
      return { resolutions: await resolvedLatestRuns(pool, taskIds), nodeCount: row?.node_count ?? 0 };
    },
  };
}

export type Activities = ReturnType<typeof createActivities>;
