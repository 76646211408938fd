import type { FaultRecord } from './faults.js';
import type { Observer } from './observer.js';
import type { Workers } from './workers.js';
import { addedRuns, missingResolutionMessages, type TaskEnd } from './checks.js';

/** What one fault (or group of faults injected together) cost. */
export interface FaultFigures {
  fault: string;
  startedAt: string;
  /** how long the process or service was down (kill → started again) */
  downMs: number;
  /** fault → the first task that became pending after it completed */
  progressMs: number | null;
  /** deliveries of a message already delivered, during this fault's window */
  duplicates: number;
  /** runs a fault added, by reason (counted by when the run started) */
  runsAdded: Record<string, number>;
  /** messages of runs resolved in this window that never arrived */
  lost: number;
  /** requests of the workers that got no clean answer in the window, by kind */
  requestErrors: Record<string, number>;
  /** the first message of each kind of unclean answer (what a worker saw) */
  requestErrorSamples: Record<string, string>;
  /** a restarted tgs process: start → ready line */
  readyAfterMs?: number;
  /** SIGTERM: how long the API took to exit */
  gracefulExitMs?: number;
  errors?: string[];
}

export function faultFigures(group: FaultRecord[], windowEnd: number, data: { observer: Observer; workers: Workers; tasks: Map<string, TaskEnd> }): FaultFigures {
  const from = Math.min(...group.map((r) => r.startedAt));
  const progress = progressAfter(data.observer, from);
  let duplicates = 0;
  for (const s of data.observer.messages.values()) duplicates += s.at.slice(1).filter((t) => t >= from && t < windowEnd).length;
  const missing = missingResolutionMessages(data.tasks.values(), data.observer.messages);
  let lost = 0;
  for (const t of data.tasks.values()) {
    for (const r of t.runs) {
      const at = r.resolved ? Date.parse(r.resolved) : NaN;
      if (at >= from && at < windowEnd && missing.has(`queue/v1/task-${r.state} ${t.taskId}.${r.runId}`)) lost++;
    }
  }
  const requestErrors: Record<string, number> = {};
  const requestErrorSamples: Record<string, string> = {};
  for (const e of data.workers.errors) {
    if (e.at < from || e.at >= windowEnd) continue;
    const key = `${e.kind} ${e.what.split(' ')[0]} api-${e.api}`;
    requestErrors[key] = (requestErrors[key] ?? 0) + 1;
    requestErrorSamples[key] ??= `+${e.at - from} ms: ${e.message}`;
  }
  const graceful = group.find((r) => r.graceful)?.graceful;
  const ready = group.map((r) => r.readyAfterMs).filter((x): x is number => x !== undefined);
  const errors = group.flatMap((r) => (r.error ? [`${r.name}: ${r.error}`] : []));
  return {
    fault: group.map((r) => (r.node ? `${r.name} (${r.node})` : r.name)).join(' + '),
    startedAt: new Date(from).toISOString(),
    downMs: Math.max(...group.map((r) => r.restartedAt - r.startedAt)),
    progressMs: progress ?? null,
    duplicates,
    runsAdded: addedRuns(data.tasks.values(), from, windowEnd),
    lost,
    requestErrors,
    requestErrorSamples,
    ...(ready.length ? { readyAfterMs: Math.max(...ready) } : {}),
    ...(graceful ? { gracefulExitMs: graceful.exitedAfterMs } : {}),
    ...(errors.length ? { errors } : {}),
  };
}

/** When the system made progress after t0: the first task that became pending after t0 and then completed. */
export function progressAfter(observer: Observer, t0: number): number | undefined {
  const pendingAfter = new Set<string>();
  for (const s of observer.messages.values()) {
    if (s.exchange === 'queue/v1/task-pending' && s.at[0] > t0) pendingAfter.add(s.routingKey.split('.').slice(0, 2).join('.'));
  }
  let first: number | undefined;
  for (const s of observer.messages.values()) {
    if (s.exchange !== 'queue/v1/task-completed' || s.at[0] <= t0) continue;
    if (pendingAfter.has(s.routingKey.split('.').slice(0, 2).join('.')) && (first === undefined || s.at[0] < first)) first = s.at[0];
  }
  return first === undefined ? undefined : first - t0;
}
