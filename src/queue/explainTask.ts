import type { Queryable } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { isResolved, type TaskState } from '../taskStates.js';
import { queueAvailability, type QueueAvailability } from './queueAvailability.js';

/**
 * "Why isn't it running?" for one task, computed from the rows the claim and resolution paths use. Each blocker
 * kind is part of the contract (docs/formats.md § Explanations): tools match on it.
 */
export type BlockerKind =
  | 'dependency'
  | 'dependency-failed'
  | 'graph-blocked'
  | 'graph-canceled'
  | 'deadline-passed'
  | 'no-workers'
  | 'workers-busy'
  | 'quarantined'
  | 'deadline-at-risk'
  | 'inconsistent';

export interface DependencyRef {
  taskId: string;
  /** its label in the graph, where it is a graph's task */
  label?: string;
  state: TaskState;
}

export interface Blocker {
  kind: BlockerKind;
  /** what clears it, for a person or a tool */
  action: string;
  dependencies?: DependencyRef[];
  taskQueueId?: string;
  lastClaimWork?: string | null;
  position?: { ahead: number; aheadAtHigherPriority: number };
  claimsPerMinute?: number | null;
  etaSeconds?: number | null;
  deadline?: string;
  blockedBy?: string[];
}

export interface TaskExplanation {
  taskId: string;
  state: TaskState;
  asOf: string;
  summary: string;
  blockers: Blocker[];
  /** the graph whose workflow schedules the task, if any */
  taskGraphId?: string;
}

interface TaskFacts {
  task_id: string;
  task_group_id: string;
  state: TaskState;
  requires: 'all-completed' | 'all-resolved';
  deadline: Date;
  provisioner_id: string;
  worker_type: string;
  priority_rank: number;
  pending_since: Date | null;
  runs: { workerGroup?: string; workerId?: string; started?: string }[];
  graph_state: string | null;
  graph_origin: string | null;
  blocked_by: string[] | null;
  label: string | null;
}

interface DependencyFacts {
  task_id: string;
  state: TaskState;
  /** when its latest run resolved, if it did */
  resolved_at: Date | null;
  retries_left: number;
  label: string | null;
  /** reruns left of its graph node, null where it is no graph's task */
  reruns_left: number | null;
}

const MAX_LISTED_DEPENDENCIES = 100;
const ago = (from: Date, now: Date) => {
  const s = Math.max(0, Math.round((now.getTime() - from.getTime()) / 1000));
  return s < 120 ? `${s} s` : s < 7200 ? `${Math.round(s / 60)} min` : `${Math.round(s / 3600)} h`;
};

/**
 * The task's explanation. `claimWorkWaitMs`: the deployment's long-poll (how often idle workers call claimWork).
 * A task whose requirements are all met but which is still unscheduled gets `inconsistent` once the last of them has
 * been resolved for `inconsistentAfterMs` (TGS_INCONSISTENT_AFTER_MS): the caller (the API) then asks the graph's
 * workflow to reconcile. Before that the resolution is on its way to the graph: an ordinary transition.
 */
export async function explainTask(db: Queryable, taskId: string, now: Date, claimWorkWaitMs: number, inconsistentAfterMs = 10_000): Promise<TaskExplanation> {
  const { rows } = await db.query<TaskFacts>(
    `SELECT t.task_id, t.task_group_id, t.state, t.requires, t.deadline, t.provisioner_id, t.worker_type, t.priority_rank,
            t.pending_since, t.runs, g.state AS graph_state, g.origin AS graph_origin, g.blocked_by, n.label
     FROM tasks t
     LEFT JOIN task_graphs g ON g.task_graph_id = t.task_group_id
     LEFT JOIN graph_nodes n ON n.task_graph_id = t.task_group_id AND n.task_id = t.task_id AND n.member
     WHERE t.task_id = $1`,
    [taskId],
  );
  const task = rows[0];
  if (!task) throw new TgsError('ResourceNotFound', `task ${taskId} not found`);
  const base = {
    taskId,
    state: task.state,
    asOf: now.toISOString(),
    ...(task.graph_state !== null ? { taskGraphId: task.task_group_id } : {}),
  };
  const blockers: Blocker[] = [];
  const deadlinePassed = task.deadline <= now;

  if (isResolved(task.state)) {
    return { ...base, summary: `${task.state}: nothing to wait for`, blockers };
  }
  if (task.graph_state === 'canceled') {
    blockers.push({ kind: 'graph-canceled', action: 'nothing: the graph was canceled (its tasks are being canceled); submit a new graph' });
  }
  if (deadlinePassed) {
    blockers.push({
      kind: 'deadline-passed',
      deadline: task.deadline.toISOString(),
      action: 'nothing: the deadline passed, the queue resolves the task as exception deadline-exceeded; create it again with a later deadline',
    });
  }
  if (task.state === 'running') {
    const run = task.runs[task.runs.length - 1];
    const since = run?.started ? ` for ${ago(new Date(run.started), now)}` : '';
    return { ...base, summary: `running on ${run?.workerGroup}/${run?.workerId}${since}`, blockers };
  }

  if (task.state === 'unscheduled') {
    const deps = await dependencyFacts(db, taskId, task.task_group_id);
    const need = (d: DependencyFacts) => (task.requires === 'all-completed' ? d.state === 'completed' : isResolved(d.state));
    const open = deps.filter((d) => !need(d));
    // the queue retries no resolved task; a graph reruns one while its node has reruns left
    const failedForGood = open.filter((d) => isResolved(d.state) && (d.reruns_left ?? 0) === 0);
    const waiting = open.filter((d) => !failedForGood.includes(d));
    if (failedForGood.length > 0) {
      blockers.push({
        kind: 'dependency-failed',
        dependencies: failedForGood.slice(0, MAX_LISTED_DEPENDENCIES).map(ref),
        action: failedForGood
          .slice(0, 3)
          .map((d) => `rerun ${d.label ?? d.task_id}`)
          .join(', ') + (failedForGood.length > 3 ? ` (and ${failedForGood.length - 3} more)` : ''),
      });
    }
    if (waiting.length > 0) {
      blockers.push({
        kind: 'dependency',
        dependencies: waiting.slice(0, MAX_LISTED_DEPENDENCIES).map(ref),
        action: 'wait: they are pending, running, or failed with retries or reruns left',
      });
    }
    if (failedForGood.length === 0 && task.graph_state === 'blocked') {
      blockers.push({
        kind: 'graph-blocked',
        blockedBy: task.blocked_by ?? [],
        action: 'rerun the graph\'s failed tasks (GET /api/scheduler/v1/task-graph/<taskGraphId>/explain names them)',
      });
    }
    const lastResolved = Math.max(0, ...deps.map((d) => d.resolved_at?.getTime() ?? 0));
    const arriving = open.length === 0 && task.graph_state !== null && now.getTime() - lastResolved < inconsistentAfterMs;
    if (arriving && !deadlinePassed && task.graph_state !== 'canceled') {
      blockers.push({
        kind: 'dependency',
        dependencies: [],
        action: `wait: its last requirement resolved ${ago(new Date(lastResolved), now)} ago and the graph is scheduling it (after ${inconsistentAfterMs / 1000} s this would be inconsistent)`,
      });
    } else if (open.length === 0 && !deadlinePassed && task.graph_state !== 'canceled') {
      blockers.push({
        kind: 'inconsistent',
        action: task.graph_state !== null ? 'none needed: this call asked the graph\'s workflow to reconcile, which schedules the task' : 'none known: no graph schedules this task',
      });
    }
    return { ...base, summary: summarize(task, blockers, deps.length), blockers };
  }

  // pending: a worker of its queue has to take it
  const taskQueueId = `${task.provisioner_id}/${task.worker_type}`;
  const queue = await queueAvailability(db, taskQueueId, now, claimWorkWaitMs);
  const position = await queuePosition(db, task);
  const etaSeconds = queue.claimsPerMinute ? Math.round((position.ahead + 1) * (60 / queue.claimsPerMinute)) : null;
  blockers.push(queueBlocker(queue, position, etaSeconds));
  if (etaSeconds !== null && now.getTime() + etaSeconds * 1000 > task.deadline.getTime() && !deadlinePassed) {
    blockers.push({
      kind: 'deadline-at-risk',
      deadline: task.deadline.toISOString(),
      etaSeconds,
      action: `add workers to ${taskQueueId}, or raise the task's priority`,
    });
  }
  return { ...base, summary: summarize(task, blockers, 0), blockers };
}

const ref = (d: DependencyFacts): DependencyRef => ({ taskId: d.task_id, ...(d.label ? { label: d.label } : {}), state: d.state });

function queueBlocker(queue: QueueAvailability, position: { ahead: number; aheadAtHigherPriority: number }, etaSeconds: number | null): Blocker {
  const common = { taskQueueId: queue.taskQueueId, lastClaimWork: queue.lastClaimWork?.toISOString() ?? null };
  switch (queue.verdict) {
    case 'no-workers':
      return { kind: 'no-workers', ...common, action: `start a worker for ${queue.taskQueueId}` };
    case 'quarantined':
      return { kind: 'quarantined', ...common, action: `lift the quarantine of the workers of ${queue.taskQueueId}, or start another worker` };
    default:
      // workers claim here: the task waits for its turn (busy workers, or those ahead of it in priority and FIFO order)
      return {
        kind: 'workers-busy',
        ...common,
        position,
        claimsPerMinute: queue.claimsPerMinute === null ? null : Math.round(queue.claimsPerMinute * 10) / 10,
        etaSeconds,
        action: position.ahead > 0 ? `wait (${position.ahead} task(s) ahead), or add workers to ${queue.taskQueueId}` : 'wait: it is next',
      };
  }
}

function summarize(task: TaskFacts, blockers: Blocker[], dependencyCount: number): string {
  const first = blockers[0];
  if (!first) return `${task.state}`;
  switch (first.kind) {
    case 'dependency-failed':
      return `will not run: ${first.dependencies!.length} of ${dependencyCount} dependencies failed for good (${first.dependencies!.map((d) => d.label ?? d.taskId).slice(0, 3).join(', ')}); ${first.action}`;
    case 'dependency':
      // every requirement met moments ago: the resolution is on its way to the graph
      if (first.dependencies!.length === 0) return `being scheduled: every requirement is met; ${first.action}`;
      return `waiting on ${first.dependencies!.length} of ${dependencyCount} dependencies: ${first.dependencies!.slice(0, 3).map((d) => `${d.label ?? d.taskId} (${d.state})`).join(', ')}`;
    case 'no-workers':
      return first.lastClaimWork ? `pending: no worker has claimed from ${first.taskQueueId} since ${first.lastClaimWork}` : `pending: no worker has ever claimed from ${first.taskQueueId}`;
    case 'quarantined':
      return `pending: the only workers of ${first.taskQueueId} are quarantined`;
    case 'workers-busy':
      return `pending: ${first.position!.ahead} task(s) ahead on ${first.taskQueueId}${first.etaSeconds != null ? `, about ${first.etaSeconds} s to go` : ''}`;
    case 'inconsistent':
      return 'every requirement is met but the task is still unscheduled: a lost wake-up; reconciling';
    default:
      return `${task.state}: ${first.kind}`;
  }
}

async function dependencyFacts(db: Queryable, taskId: string, taskGroupId: string): Promise<DependencyFacts[]> {
  const { rows } = await db.query<DependencyFacts>(
    `SELECT d.task_id, d.state, (d.runs->-1->>'resolved')::timestamptz AS resolved_at, d.retries_left, n.label, n.reruns_left
     FROM task_dependencies td JOIN tasks d ON d.task_id = td.required_task_id
     LEFT JOIN graph_nodes n ON n.task_graph_id = $2 AND n.task_id = d.task_id
     WHERE td.dependent_task_id = $1 ORDER BY d.task_id`,
    [taskId, taskGroupId],
  );
  return rows;
}

/** Pending tasks of the same queue a claim takes before this one (priority, then FIFO: claimWork's order). */
async function queuePosition(db: Queryable, task: TaskFacts): Promise<{ ahead: number; aheadAtHigherPriority: number }> {
  const { rows } = await db.query<{ ahead: number; higher: number }>(
    `SELECT count(*)::int AS ahead, count(*) FILTER (WHERE priority_rank > $3)::int AS higher
     FROM tasks WHERE provisioner_id = $1 AND worker_type = $2 AND tgs_task_pending(state)
       AND (priority_rank > $3 OR (priority_rank = $3 AND (pending_since, task_id) < ($4, $5)))`,
    [task.provisioner_id, task.worker_type, task.priority_rank, task.pending_since, task.task_id],
  );
  return { ahead: rows[0].ahead, aheadAtHigherPriority: rows[0].higher };
}
