import { expectedRuns, type GraphPlan } from './load.js';
import type { Seen } from './observer.js';
import type { Claim } from './workers.js';

/** What Postgres holds for one task at the end. */
export interface TaskEnd {
  taskId: string;
  graphId: string;
  runs: { runId: number; state: string; reasonCreated: string; reasonResolved?: string; scheduled?: string; started?: string; resolved?: string }[];
}

export interface Check {
  name: string;
  ok: boolean;
  /** how many things it checked, how many failed, and the first offenders */
  checked: number;
  failed: number;
  failures: string[];
}

export interface EndState {
  plans: GraphPlan[];
  /** graph id → label → taskId */
  taskIds: Map<string, Map<string, string>>;
  graphStates: Map<string, string>;
  tasks: Map<string, TaskEnd>;
  outboxRows: number;
  /** task-graph workflows still running, by graph id */
  runningWorkflows: Set<string>;
  messages: Map<string, Seen>;
  claims: Claim[];
  handedTwice: { taskId: string; runId: number }[];
  unexpectedExits: string[];
  /** requests an API under SIGTERM cut off without an answer (a graceful stop must answer or refuse them) */
  gracefulCuts: string[];
  gracefulStops: number;
}

const FAULT_EXCEPTIONS = new Set(['claim-expired', 'worker-shutdown', 'intermittent-task']);

function check(name: string, checked: number, failures: string[]): Check {
  return { name, ok: failures.length === 0, checked, failed: failures.length, failures: failures.slice(0, 20) };
}

const RESOLVED = new Set(['completed', 'failed', 'exception']);

/** `queue/v1/task-<state> <taskId>.<runId>` of every resolved run whose message never arrived. */
export function missingResolutionMessages(tasks: Iterable<TaskEnd>, messages: Map<string, Seen>): Set<string> {
  const seen = seenRuns(messages);
  const out = new Set<string>();
  for (const t of tasks) {
    for (const r of t.runs) {
      const key = `queue/v1/task-${r.state} ${t.taskId}.${r.runId}`;
      if (RESOLVED.has(r.state) && !seen.has(key)) out.add(key);
    }
  }
  return out;
}

/** Resolution messages seen, as `exchange taskId.runId`. */
function seenRuns(messages: Map<string, Seen>): Set<string> {
  const out = new Set<string>();
  for (const s of messages.values()) {
    const [taskId, runId] = s.routingKey.split('.');
    out.add(`${s.exchange} ${taskId}.${runId}`);
  }
  return out;
}

/** Every check of the brief over the run's end state; each names its offenders. */
export function runChecks(end: EndState): Check[] {
  const checks: Check[] = [];

  // 1. every graph reached its scripted end state
  checks.push(check('graph end states', end.plans.length, end.plans.flatMap((p) => (end.graphStates.get(p.id) === p.expected ? [] : [`${p.id} (${p.shape}) is ${end.graphStates.get(p.id)}, want ${p.expected}`]))));

  // 2. every task has the runs its script asked for, and none more than a fault explains
  const runFailures: string[] = [];
  let tasksChecked = 0;
  for (const plan of end.plans) {
    const ids = end.taskIds.get(plan.id) as Map<string, string>;
    for (const node of plan.nodes) {
      tasksChecked++;
      const taskId = ids.get(node.label) as string;
      const runs = end.tasks.get(taskId)?.runs ?? [];
      const scripted = runs.filter((r) => r.state === 'completed' || r.state === 'failed').map((r) => r.state);
      const want = expectedRuns(node, plan.neverRuns);
      const unexplained = runs.filter((r) => r.state === 'exception' && !FAULT_EXCEPTIONS.has(r.reasonResolved ?? ''));
      const open = runs.filter((r) => r.state === 'pending' || r.state === 'running');
      if (scripted.join() !== want.join() || unexplained.length || open.length) {
        runFailures.push(`${plan.id}/${node.label} ${taskId}: runs [${runs.map((r) => `${r.state}${r.reasonResolved ? `:${r.reasonResolved}` : ''}`).join(', ')}], script wants [${want.join(', ')}]`);
      }
    }
  }
  checks.push(check('runs as scripted (extra runs only from faults, with their reason)', tasksChecked, runFailures));

  // 3. no run handed to two workers, and no task held by two workers at once
  const byTask = new Map<string, Claim[]>();
  for (const c of end.claims) byTask.set(c.taskId, [...(byTask.get(c.taskId) ?? []), c]);
  const overlaps: string[] = end.handedTwice.map((h) => `${h.taskId} run ${h.runId} handed out twice`);
  for (const [taskId, claims] of byTask) {
    claims.sort((a, b) => a.claimedAt - b.claimedAt);
    for (let i = 1; i < claims.length; i++) {
      const prev = claims[i - 1];
      // a worker holds a run until it has done the work and sent its report; when the answer comes back is no
      // measure of that, since the queue may act on a report (resolve the run, schedule the retry, hand it to
      // another worker) well before a fault-delayed answer reaches the worker
      const held = prev.doneAt === undefined || prev.doneAt > claims[i].claimedAt;
      // a claim that expired while its worker still held it: the queue gave the task to another worker
      // after takenUntil, by design; it shows as a claim-expired run and is counted there
      const expired = end.tasks.get(taskId)?.runs.find((r) => r.runId === prev.runId)?.reasonResolved === 'claim-expired';
      if (held && !expired) overlaps.push(`${taskId}: run ${claims[i].runId} claimed by ${claims[i].worker} while ${prev.worker} held run ${prev.runId}`);
    }
  }
  checks.push(check('no task with two workers at once', end.claims.length, overlaps));

  // 4. no task became pending before its requirements resolved
  const early: string[] = [];
  let edges = 0;
  for (const plan of end.plans) {
    const ids = end.taskIds.get(plan.id) as Map<string, string>;
    for (const node of plan.nodes) {
      const first = end.tasks.get(ids.get(node.label) as string)?.runs[0];
      if (!first?.scheduled) continue;
      for (const r of node.requires) {
        edges++;
        const req = end.tasks.get(ids.get(r) as string)?.runs.findLast((x) => x.state === 'completed');
        if (!req?.resolved || Date.parse(first.scheduled) < Date.parse(req.resolved)) {
          early.push(`${plan.id}/${node.label} pending at ${first.scheduled}, its requirement ${r} completed at ${req?.resolved ?? 'never'}`);
        }
      }
    }
  }
  checks.push(check('no task pending before its requirements completed', edges, early));

  // 5. every resolution message and every graph message arrived at least once
  const missing = [...missingResolutionMessages(end.tasks.values(), end.messages)];
  let expected = [...end.tasks.values()].reduce((n, t) => n + t.runs.filter((r) => RESOLVED.has(r.state)).length, 0);
  const graphKeys = new Set([...end.messages.values()].filter((s) => s.exchange.startsWith('scheduler/v1/')).map((s) => `${s.exchange} ${s.routingKey.split('.')[7]}`));
  for (const plan of end.plans) {
    const state = end.graphStates.get(plan.id);
    if (state !== 'finished' && state !== 'blocked') continue;
    expected++;
    const key = `scheduler/v1/task-graph-${state} ${plan.id}`;
    if (!graphKeys.has(key)) missing.push(key);
  }
  checks.push(check('every resolution and graph message arrived', expected, missing));

  // 6. the outbox drained and no finished graph's workflow is still running
  checks.push(check('outbox empty', 1, end.outboxRows ? [`${end.outboxRows} outbox rows left`] : []));
  const lingering = end.plans.filter((p) => end.graphStates.get(p.id) === 'finished' && end.runningWorkflows.has(p.id)).map((p) => `task-graph/${p.id} still running`);
  checks.push(check('no finished graph left with a running workflow', end.plans.length, lingering));

  // 7. a graceful stop (SIGTERM) answers or refuses every request; none is cut off without an answer
  checks.push(check('SIGTERM of an API cuts no request', end.gracefulStops, end.gracefulCuts));

  // 8. no tgs process died by itself
  checks.push(check('no process exited unasked', 8, end.unexpectedExits));
  return checks;
}

/**
 * Fault-added runs (exception runs a fault explains), by their reason, for runs that started in [from, to):
 * a claim a fault lost expires a claim timeout later, so the start is when the fault struck.
 */
export function addedRuns(tasks: Iterable<TaskEnd>, from = 0, to = Infinity): Record<string, number> {
  const out: Record<string, number> = {};
  for (const t of tasks) {
    for (const r of t.runs) {
      if (r.state !== 'exception') continue;
      const at = Date.parse(r.started ?? r.scheduled ?? '');
      if (at >= from && at < to) out[r.reasonResolved ?? '?'] = (out[r.reasonResolved ?? '?'] ?? 0) + 1;
    }
  }
  return out;
}
