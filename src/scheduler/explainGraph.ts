import type { Queryable } from '../db/pool.js';
import { isResolved, type TaskState } from '../taskStates.js';
import { queueAvailability } from '../queue/queueAvailability.js';
import { isPendingSql, isUnresolvedSql } from '../queue/taskRow.js';
import type { ExplainQueryResult, GraphState } from '../workflows/contract.js';
import type { GraphRow } from './graphStore.js';
import type { LastAmend } from './lastAmend.js';

/**
 * One root cause of a graph's unresolved tasks. `count`: the unresolved member tasks it explains (each counted under
 * one cause). The kinds are the per-task explanation's (src/queue/explainTask.ts), for what explains many tasks.
 */
export interface RootCause {
  kind: 'dependency-failed' | 'no-workers' | 'workers-busy' | 'quarantined' | 'dependency' | 'inconsistent' | 'graph-canceled' | 'graph-terminated';
  taskId?: string;
  label?: string;
  taskQueueId?: string;
  count: number;
  action: string;
  /** no-workers: the last claimWork on the queue, null when none ever */
  lastClaimWork?: string | null;
  /** dependency: how many of the tasks it stands for are running, pending elsewhere, or being scheduled */
  running?: number;
}

export interface GraphExplanation {
  taskGraphId: string;
  state: GraphState;
  asOf: string;
  summary: string;
  /** unresolved member tasks */
  unresolved: number;
  rootCauses: RootCause[];
  /** root causes past the page (the ones explaining fewest tasks) */
  omittedRootCauses: number;
  /** whether the workflow's model answered; without it only the queue's rows explain */
  workflow: 'answered' | 'unavailable';
  /** the call found tasks the model should have scheduled, and asked the workflow to reconcile */
  reconciling: boolean;
  /** who ended the graph and why (canceled, terminated), as recorded with its state */
  stateReason?: string;
  /** the graph's last amend and what it did node by node, with each dependent's early cutoff (the API adds it) */
  lastAmend?: LastAmend;
}

/**
 * A graph's root causes: the workflow's model says which sources explain which tasks (src/workflows/explain.ts);
 * the queue's rows say what each source is now. A live source the queue has shown resolved for `inconsistentAfterMs`
 * is a lost message (`inconsistent`: the caller asks the workflow to reconcile); one resolved more recently is on its
 * way and waits with the running ones; live sources pending on a queue are grouped by queue,
 * with its workers' availability.
 */
export async function explainGraph(
  db: Queryable,
  row: GraphRow,
  model: ExplainQueryResult | undefined,
  options: { now: Date; claimWorkWaitMs: number; limit: number; inconsistentAfterMs: number },
): Promise<GraphExplanation> {
  const base = {
    taskGraphId: row.task_graph_id,
    asOf: options.now.toISOString(),
    workflow: model ? ('answered' as const) : ('unavailable' as const),
    ...(row.state_reason ? { stateReason: row.state_reason } : {}),
  };
  const why = row.state_reason ? ` (${row.state_reason})` : '';
  // A graph's members are its task group's tasks: an index-only count over tasks_group_unresolved (migration 019). The
  // same count as a join of graph_nodes and tasks took most of a 300,000-task graph's 2-5 s explanation.
  const { rows: counts } = await db.query<{ count: number }>(
    `SELECT count(*)::int AS count FROM tasks WHERE task_group_id = $1 AND ${isUnresolvedSql()}`,
    [row.task_graph_id],
  );
  const unresolved = counts[0].count;
  if (row.state === 'finished' || (unresolved === 0 && row.state !== 'canceled' && row.state !== 'terminated')) {
    return { ...base, state: row.state as GraphState, summary: `${row.state}: nothing to wait for`, unresolved, rootCauses: [], omittedRootCauses: 0, reconciling: false };
  }
  if (row.state === 'canceled') {
    const cause: RootCause = { kind: 'graph-canceled', count: unresolved, action: 'nothing: the graph was canceled; its remaining tasks are being canceled' };
    const summary = unresolved === 0 ? `canceled${why}: nothing to wait for` : `canceled${why}: ${unresolved} task(s) left to cancel`;
    return { ...base, state: 'canceled', summary, unresolved, rootCauses: unresolved === 0 ? [] : [cause], omittedRootCauses: 0, reconciling: false };
  }

  if (row.state === 'terminated') {
    // its workflow closed before the graph ended (src/scheduler/closedWorkflows.ts): nothing moves until it is resumed
    const id = row.task_graph_id;
    const cause: RootCause = {
      kind: 'graph-terminated',
      count: unresolved,
      action: `resume it: tgs graph resume ${id} (POST /api/scheduler/v1/task-graph/${id}/resume); its completed tasks do not run again`,
    };
    const summary = `terminated${why}: its workflow ended before the graph did; ${unresolved} task(s) unresolved, left as they are until it is resumed`;
    return { ...base, state: 'terminated', summary, unresolved, rootCauses: [cause], omittedRootCauses: 0, reconciling: false };
  }

  const causes: RootCause[] = [];
  let reconciling = false;
  const live = (model?.causes ?? []).filter((c) => c.kind === 'live');
  const facts = await taskFacts(db, [...new Set((model?.causes ?? []).filter((c) => c.taskId).map((c) => c.taskId))]);
  const byQueue = new Map<string, number>();
  let running = 0;
  let runningTasks = 0;
  let lost = 0;
  for (const c of live) {
    const f = facts.get(c.taskId);
    if (!f || isResolved(f.state)) {
      // resolved moments ago: the resolution is on its way to the workflow (an ordinary transition), not lost
      if (f?.resolved_at && options.now.getTime() - f.resolved_at.getTime() < options.inconsistentAfterMs) running += c.count;
      else lost += c.count;
      continue;
    }
    if (f.state === 'running') {
      running += c.count;
      runningTasks++;
    } else if (f.state === 'pending') {
      byQueue.set(f.task_queue_id, (byQueue.get(f.task_queue_id) ?? 0) + c.count);
    } else {
      // unscheduled in the queue while the model believes it live: the dispatch is in flight
      running += c.count;
    }
  }
  if (!model) {
    // without the model: the pending tasks by queue, from the rows alone
    const { rows } = await db.query<{ task_queue_id: string; count: number }>(
      `SELECT provisioner_id || '/' || worker_type AS task_queue_id, count(*)::int AS count
       FROM tasks WHERE task_group_id = $1 AND ${isPendingSql()} GROUP BY 1`,
      [row.task_graph_id],
    );
    for (const r of rows) byQueue.set(r.task_queue_id, r.count);
  }
  for (const c of model?.causes ?? []) {
    if (c.kind === 'failed') {
      const name = c.label || c.taskId;
      causes.push({ kind: 'dependency-failed', taskId: c.taskId, ...(c.label ? { label: c.label } : {}), count: c.count, action: `rerun ${name}` });
    } else if (c.kind === 'external') {
      const state = facts.get(c.taskId)?.state ?? 'unscheduled';
      causes.push({ kind: 'dependency', taskId: c.taskId, count: c.count, action: `wait for task ${c.taskId} of another task group (${state})` });
    } else if (c.kind === 'stuck') {
      lost += c.count;
    }
  }
  for (const [taskQueueId, count] of byQueue) {
    const queue = await queueAvailability(db, taskQueueId, options.now, options.claimWorkWaitMs);
    const lastClaimWork = queue.lastClaimWork?.toISOString() ?? null;
    if (queue.verdict === 'no-workers') causes.push({ kind: 'no-workers', taskQueueId, count, lastClaimWork, action: `start a worker for ${taskQueueId}` });
    else if (queue.verdict === 'quarantined') causes.push({ kind: 'quarantined', taskQueueId, count, action: `lift the quarantine of the workers of ${taskQueueId}, or start another worker` });
    else causes.push({ kind: 'workers-busy', taskQueueId, count, action: `wait, or add workers to ${taskQueueId}` });
  }
  const scheduling = (model?.causes ?? []).filter((c) => c.kind === 'ready' || c.kind === 'rerun').reduce((n, c) => n + c.count, 0);
  if (running + scheduling > 0) {
    causes.push({
      kind: 'dependency',
      count: running + scheduling,
      running: runningTasks,
      action: `wait: ${runningTasks} task(s) running${scheduling > 0 ? `, ${scheduling} being scheduled` : ''}`,
    });
  }
  if (lost > 0) {
    reconciling = true;
    causes.push({ kind: 'inconsistent', count: lost, action: 'none needed: this call asked the graph\'s workflow to reconcile with the queue' });
  }
  causes.sort((a, b) => b.count - a.count);
  const page = causes.slice(0, options.limit);
  return {
    ...base,
    state: row.state as GraphState,
    summary: summarize(page, unresolved),
    unresolved,
    rootCauses: page,
    omittedRootCauses: causes.length - page.length + (model?.omittedCauses ?? 0),
    reconciling,
  };
}

function summarize(causes: RootCause[], unresolved: number): string {
  const parts = causes.slice(0, 3).map((c) => {
    switch (c.kind) {
      case 'dependency-failed':
        return `${c.count} task(s) wait on failed task ${c.label ?? c.taskId}`;
      case 'no-workers':
        return `${c.count} on ${c.taskQueueId}, where ${c.lastClaimWork ? `no worker has claimed since ${c.lastClaimWork}` : 'no worker has ever claimed'}`;
      case 'quarantined':
        return `${c.count} on ${c.taskQueueId}, whose only workers are quarantined`;
      case 'workers-busy':
        return `${c.count} on ${c.taskQueueId}, whose workers are busy`;
      case 'inconsistent':
        return `${c.count} waiting on news the workflow missed (reconciling)`;
      default:
        return `${c.count} in progress`;
    }
  });
  return `${unresolved} task(s) unresolved: ${parts.join('; ')}`;
}

async function taskFacts(db: Queryable, taskIds: string[]): Promise<Map<string, { state: TaskState; task_queue_id: string; resolved_at: Date | null }>> {
  if (taskIds.length === 0) return new Map();
  const { rows } = await db.query<{ task_id: string; state: TaskState; task_queue_id: string; resolved_at: Date | null }>(
    `SELECT task_id, state, provisioner_id || '/' || worker_type AS task_queue_id, (runs->-1->>'resolved')::timestamptz AS resolved_at
     FROM tasks WHERE task_id = ANY($1)`,
    [taskIds],
  );
  return new Map(rows.map((r) => [r.task_id, r]));
}
