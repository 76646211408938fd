import { setMaxListeners } from 'node:events';
import { ApiClient, TgsApiError, type TgsCredentials } from '../../src/client/http.js';
import { PROVISIONER, WORKER_TYPE } from './load.js';

/** One run handed to one worker: when, and how it ended for the worker. */
export interface Claim {
  taskId: string;
  runId: number;
  worker: string;
  claimedAt: number;
  /** when the worker finished the run's work and sent its first report: it holds the task until then */
  doneAt?: number;
  outcome?: 'completed' | 'failed';
  /** how the report ended: ok, refused (status and code), or given up (never answered) */
  report?: string;
}

/** A request that did not get a clean answer: where and when, and whether it may have reached the API. */
export interface RequestError {
  api: number;
  at: number;
  kind: 'refused' | 'cut' | '5xx';
  what: string;
  message: string;
}

interface ClaimedTask {
  status: { taskId: string };
  runId: number;
  task: { payload: { chaos?: { failTimes: number; sleepMs: number } } };
  credentials: TgsCredentials;
}

function classify(err: unknown): RequestError['kind'] | undefined {
  if (!(err instanceof TgsApiError)) return 'cut';
  // `connect ECONNRESET`: reset before the connection was up, so nothing was sent
  if (err.status === 0) return /ECONNREFUSED|connect ECONNRESET/.test(err.message) ? 'refused' : 'cut';
  if (err.status >= 500) return '5xx';
  return undefined;
}

/**
 * Taskcluster-style workers: each slot calls claimWork for several tasks on one of the APIs (the other when
 * it cannot be reached, as a load balancer would), "runs" each claimed task for its scripted time, and
 * reports it completed, or failed while the task's script says it has failures left (counted per task, so a
 * run a fault adds does not shift the script). A report that gets no answer is retried, on either API,
 * until it is answered; every claim and every unclean answer is recorded for the checks.
 */
export function startWorkers(options: { rootUrls: string[]; credentials: TgsCredentials; slots: number; batch: number }) {
  const abort = new AbortController();
  setMaxListeners(0, abort.signal);
  const apis = options.rootUrls.map((u) => new ApiClient(u, options.credentials, abort.signal));
  const claims: Claim[] = [];
  const byRun = new Map<string, Claim>();
  const handedTwice: { taskId: string; runId: number; first: Claim; second: Claim }[] = [];
  const failuresDone = new Map<string, number>();
  const errors: RequestError[] = [];
  const reportsRefused: { taskId: string; runId: number; status: number; code: string }[] = [];
  let stopped = false;
  let reported = 0;
  let lastReportAt = 0;
  // an API that refused a connection (or said it is stopping) is tried second for a second, as a load balancer's
  // health check would
  const downUntil = options.rootUrls.map(() => 0);
  // an API being stopped: taken out of rotation as its SIGTERM is sent (see outOfRotation below)
  const out = new Set<number>();
  const pick = (preferred: number) => {
    const i = preferred % apis.length;
    return downUntil[i] > Date.now() || out.has(i) ? (i + 1) % apis.length : i;
  };

  const call = async <T>(what: string, apiIndex: number, fn: (api: ApiClient) => Promise<T>): Promise<T> => {
    try {
      return await fn(apis[apiIndex]);
    } catch (err) {
      const kind = classify(err);
      // refused, or told by a stopping API to go elsewhere (503 ServiceUnavailable): a load balancer's
      // health check takes it out of rotation for a while
      const stopping = err instanceof TgsApiError && err.status === 503 && err.code === 'ServiceUnavailable';
      if (kind === 'refused' || stopping) downUntil[apiIndex] = Date.now() + 1000;
      if (kind && !stopped) errors.push({ api: apiIndex + 1, at: Date.now(), kind, what, message: (err as Error).message.slice(0, 200) });
      throw err;
    }
  };

  const report = async (slot: number, task: ClaimedTask, claim: Claim) => {
    const taskId = task.status.taskId;
    const script = task.task.payload.chaos ?? { failTimes: 0, sleepMs: 0 };
    await new Promise((r) => setTimeout(r, script.sleepMs));
    const failed = failuresDone.get(taskId) ?? 0;
    const outcome = failed < script.failTimes ? 'failed' : 'completed';
    claim.doneAt = Date.now();
    for (let attempt = 0; !stopped; attempt++) {
      const apiIndex = pick(slot + attempt);
      try {
        await call(`report ${outcome}`, apiIndex, (api) => api.request('queue', 'POST', `/task/${taskId}/runs/${task.runId}/${outcome}`, undefined, task.credentials));
        if (outcome === 'failed') failuresDone.set(taskId, failed + 1);
        lastReportAt = Date.now();
        claim.outcome = outcome;
        claim.report = 'ok';
        reported++;
        return;
      } catch (err) {
        if (err instanceof TgsApiError && err.status > 0 && err.status < 500) {
          // answered and refused: the run is no longer this worker's (e.g. its claim expired)
          claim.report = `refused ${err.status} ${err.code}`;
          reportsRefused.push({ taskId, runId: task.runId, status: err.status, code: err.code });
          return;
        }
        await new Promise((r) => setTimeout(r, Math.min(2000, 100 * 2 ** Math.min(attempt, 4))));
      }
    }
    claim.report = 'abandoned at stop';
  };

  const loop = async (slot: number) => {
    for (let attempt = 0; !stopped; ) {
      const apiIndex = pick(slot + attempt);
      let tasks: ClaimedTask[];
      try {
        const res = await call('claimWork', apiIndex, (api) =>
          api.request<{ tasks: ClaimedTask[] }>('queue', 'POST', `/claim-work/${PROVISIONER}/${WORKER_TYPE}`, { workerGroup: 'chaos', workerId: `w${slot}`, tasks: options.batch }),
        );
        tasks = res.tasks;
      } catch {
        attempt++;
        await new Promise((r) => setTimeout(r, 200));
        continue;
      }
      const now = Date.now();
      const mine = tasks.map((task) => {
        const claim: Claim = { taskId: task.status.taskId, runId: task.runId, worker: `w${slot}`, claimedAt: now };
        const key = `${claim.taskId}/${claim.runId}`;
        const first = byRun.get(key);
        if (first) handedTwice.push({ taskId: claim.taskId, runId: claim.runId, first, second: claim });
        else byRun.set(key, claim);
        claims.push(claim);
        return { task, claim };
      });
      await Promise.all(mine.map(({ task, claim }) => report(slot, task, claim)));
    }
  };
  const loops = Array.from({ length: options.slots }, (_, i) => loop(i));
  return {
    claims,
    handedTwice,
    errors,
    reportsRefused,
    get reported() {
      return reported;
    },
    get lastReportAt() {
      return lastReportAt;
    },
    /**
     * Takes API `index` (0-based) out of rotation or puts it back, as Kubernetes removes a terminating pod
     * from its Service's endpoints while it sends the SIGTERM: requests already sent, or picked before, still
     * reach it. Without this a worker keeps opening connections to a stopping API, and one that lands in the
     * kernel's accept queue in the instant the API closes its listening socket is reset (TCP cannot close a
     * listener without resetting its queue; Go's http.Server.Shutdown has the same window).
     */
    outOfRotation(index: number, isOut: boolean) {
      if (isOut) out.add(index);
      else out.delete(index);
    },
    async stop() {
      stopped = true;
      abort.abort();
      await Promise.allSettled(loops);
    },
  };
}

export type Workers = ReturnType<typeof startWorkers>;
