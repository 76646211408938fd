import { setMaxListeners } from 'node:events';
import { ApiClient, type TgsCredentials } from '../src/client/http.js';
import { WorkerStream } from '../src/client/workerStream.js';

export type Outcome = 'completed' | 'failed' | 'exception';

export interface ClaimedTask {
  taskId: string;
  runId: number;
  task: { payload: Record<string, unknown>; metadata?: { name?: string } };
  credentials: TgsCredentials;
}

/** What `startFastWorker` is told: where it claims, as whom, and how it decides each outcome. */
export interface FastWorkerOptions {
  rootUrl: string;
  credentials: TgsCredentials;
  provisionerId: string;
  workerType: string;
  concurrency?: number;
  /** tasks per claimWork call (a real worker asks for its free capacity) */
  batch?: number;
  /**
   * Report the runs of each claim in one reportResolutions call signed with `credentials` (which then need
   * `queue:resolve-task:` scopes), instead of one Taskcluster report each, signed with the run's credentials.
   */
  batchReports?: boolean;
  /**
   * `stream`: claims pushed over the worker stream (src/client/workerStream.ts), capacity concurrency × batch, and
   * the reports of each tick in one frame; `batch` and `batchReports` then only size the capacity. Default `claimWork`.
   */
  transport?: 'claimWork' | 'stream';
  decide?: (task: ClaimedTask) => Outcome | Promise<Outcome>;
  onClaim?: (task: ClaimedTask) => void;
  onReport?: (task: ClaimedTask, outcome: Outcome) => void;
}

export type FastWorker = ReturnType<typeof startFastWorker>;

/** The outcome a task asks for: payload.outcomes[runId], its last entry for later runs, else completed. */
function outcomeOf(task: ClaimedTask): Outcome {
  const outcomes = task.task.payload.outcomes as Outcome[] | undefined;
  return outcomes?.[task.runId] ?? outcomes?.at(-1) ?? 'completed';
}

/**
 * A worker that claims and reports with no work in between: the outcome comes from
 * payload.outcomes[runId] (default 'completed'), or from `decide` when given.
 */
export function startFastWorker(options: FastWorkerOptions) {
  if (options.transport === 'stream') return startStreamWorker(options);
  const abort = new AbortController();
  // every request in flight listens on the one stop signal
  setMaxListeners(0, abort.signal);
  const api = new ApiClient(options.rootUrl, options.credentials, abort.signal);
  let stopped = false;
  const reported: { taskId: string; runId: number; outcome: Outcome }[] = [];
  const decide = options.decide ?? outcomeOf;
  const loop = async (slot: number) => {
    while (!stopped) {
      let claimed: ClaimedTask[];
      try {
        const res = await api.request<{ tasks: (Omit<ClaimedTask, 'taskId'> & { status: { taskId: string } })[] }>('queue', 'POST', `/claim-work/${options.provisionerId}/${options.workerType}`, {
          workerGroup: 'fast',
          workerId: `w${slot}`,
          tasks: options.batch ?? 1,
        });
        claimed = res.tasks.map((t) => ({ ...t, taskId: t.status.taskId }));
      } catch (err) {
        if (stopped) return;
        await new Promise((r) => setTimeout(r, 200));
        void err;
        continue;
      }
      for (const task of claimed) options.onClaim?.(task);
      if (options.batchReports) {
        if (claimed.length > 0) await reportBatch(claimed);
        continue;
      }
      // A worker with capacity runs what it claimed side by side: the reports of one batch go out together.
      await Promise.all(
        claimed.map(async (task) => {
          const outcome = await decide(task);
          const path = `/task/${task.taskId}/runs/${task.runId}/${outcome}`;
          try {
            await api.request('queue', 'POST', path, outcome === 'exception' ? { reason: 'malformed-payload' } : undefined, task.credentials);
          } catch (err) {
            if (!stopped) console.error(`fast worker: reporting ${path} failed: ${(err as Error).message}`);
            return;
          }
          reported.push({ taskId: task.taskId, runId: task.runId, outcome });
          options.onReport?.(task, outcome);
        }),
      );
    }
  };
  const reportBatch = async (claimed: ClaimedTask[]) => {
    const outcomes = await Promise.all(claimed.map(decide));
    const resolutions = claimed.map((task, i) => ({ taskId: task.taskId, runId: task.runId, outcome: outcomes[i], ...(outcomes[i] === 'exception' ? { reason: 'malformed-payload' } : {}) }));
    let answers: { error?: { message: string } }[];
    try {
      answers = (await api.request<{ resolutions: { error?: { message: string } }[] }>('queue', 'POST', '/task-resolutions', { resolutions })).resolutions;
    } catch (err) {
      if (!stopped) console.error(`fast worker: reporting ${claimed.length} runs failed: ${(err as Error).message}`);
      return;
    }
    for (const [i, task] of claimed.entries()) {
      const error = answers[i].error;
      if (error) {
        if (!stopped) console.error(`fast worker: reporting ${task.taskId}/${task.runId} ${outcomes[i]} failed: ${error.message}`);
        continue;
      }
      reported.push({ taskId: task.taskId, runId: task.runId, outcome: outcomes[i] });
      options.onReport?.(task, outcomes[i]);
    }
  };
  const loops = Array.from({ length: options.concurrency ?? 4 }, (_, i) => loop(i));
  return {
    reported,
    async stop() {
      stopped = true;
      abort.abort();
      await Promise.allSettled(loops);
    },
  };
}

/** The fast worker on the worker stream: a report for each pushed claim as it arrives, the capacity given back once it is answered. */
function startStreamWorker(options: FastWorkerOptions) {
  let stopped = false;
  const reported: { taskId: string; runId: number; outcome: Outcome }[] = [];
  const decide = options.decide ?? outcomeOf;
  const inFlight = new Set<Promise<void>>();
  const report = async (task: ClaimedTask) => {
    const outcome = await decide(task);
    try {
      const [answer] = await stream.resolve([{ taskId: task.taskId, runId: task.runId, outcome, ...(outcome === 'exception' ? { reason: 'malformed-payload' as const } : {}) }]);
      if ('error' in answer) throw new Error(answer.error.message);
      reported.push({ taskId: task.taskId, runId: task.runId, outcome });
      options.onReport?.(task, outcome);
    } catch (err) {
      if (!stopped) console.error(`fast worker: reporting ${task.taskId}/${task.runId} ${outcome} failed: ${(err as Error).message}`);
    } finally {
      stream.release();
    }
  };
  const stream = new WorkerStream({
    rootUrl: options.rootUrl,
    credentials: options.credentials,
    provisionerId: options.provisionerId,
    workerType: options.workerType,
    workerGroup: 'fast',
    workerId: 'stream',
    capacity: (options.concurrency ?? 4) * (options.batch ?? 1),
    onClaim: (claim) => {
      const task: ClaimedTask = { ...claim, taskId: claim.status.taskId };
      options.onClaim?.(task);
      const p = report(task).finally(() => inFlight.delete(p));
      inFlight.add(p);
    },
  });
  return {
    reported,
    async stop() {
      stopped = true;
      await Promise.allSettled([...inFlight]);
      await stream.close();
    },
  };
}
