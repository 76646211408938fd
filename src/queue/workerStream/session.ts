import type { WebSocket } from 'ws';
import type { ApiDeps } from '../../api/deps.js';
import type { AuthContext } from '../../auth/authenticate.js';
import { requireScopes } from '../../auth/requireScopes.js';
import { expressionSatisfied } from '../../auth/scopes.js';
import { toTgsError } from '../../api/errorReply.js';
import { OutageLog } from '../../outageLog.js';
import { claimPending, MAX_CLAIM_COUNT, recordClaims, type ClaimRequest, type ClaimedRun } from '../claimWork.js';
import { resolveRuns, type Resolution } from '../resolveTask.js';
import { TgsError } from '../../errors.js';
import { logResolutions, resolutionsScopes } from '../api/resolutions.js';
import type { ResolvedRun } from '../notify.js';
import { loadTasks } from '../taskRow.js';
import { EXCEPTION_REASONS } from '../run.js';
import { CLOSE, MAX_RESOLVES_IN_FLIGHT, MAX_STREAM_CAPACITY, parseWorkerFrame, welcome, type ApiFrame, type WorkerFrame } from './frames.js';

type Log = { info(fields: object, line: string): void; warn(fields: object, line: string): void };

/** The API process's index of the runs its streams hold, `<taskId>/<runId>` → the stream that pushed it. */
export type RunHolders = Map<string, WorkerStreamSession>;

const runKey = (taskId: string, runId: number) => `${taskId}/${runId}`;

/** How long a draining stream has to finish its worker's resolves and be closed by it before the API closes it. */
export const DRAIN_GRACE_MS = 5000;
/** How often an idle stream's worker is recorded as seen (explanations' `lastClaimWork`): a claimWork long-poll's rhythm. */
const SEEN_EVERY_MS = 5000;
/** setTimeout's longest delay (a longer one fires at once); a stream this old drains then. */
const MAX_TIMER_MS = 2 ** 31 - 1;
/** WebSocket pings: a worker that answered none between two is gone (a half-open TCP connection). */
const PING_EVERY_MS = 30_000;

/**
 * One worker's stream (docs/api.md § The worker stream): the API claims for it whenever it has capacity left and
 * its queue has work (the claimWork long-poll's wake-ups, with no request in between), pushes what it claimed, and
 * resolves the runs the worker reports, a frame of up to 100 at a time. Authenticated once, when it opened: it
 * drains after TGS_WORKER_STREAM_MAX_AGE_S or when its credentials expire, whichever comes first, and the worker
 * opens a new one.
 */
export class WorkerStreamSession {
  /** tasks the worker asked for and was not given yet */
  private capacity = 0;
  private draining = false;
  private closed = false;
  /** aborts the claim loop's wait: capacity came, or the stream drains or closed */
  private wake = new AbortController();
  private readonly resolving = new Set<Promise<void>>();
  /** runs pushed to the worker and not reported by it yet (their keys in `holders` too) */
  private readonly held = new Set<string>();
  /** runs of a `holding` frame being checked, with a resolution noticed meanwhile (indexed in `holders` too) */
  private readonly adopting = new Map<string, ResolvedRun | undefined>();
  private readonly timers: NodeJS.Timeout[] = [];
  private readonly queue: string;
  private readonly claiming: Promise<void>;
  readonly done: Promise<void>;

  constructor(
    private readonly ws: WebSocket,
    private readonly deps: ApiDeps,
    private readonly auth: AuthContext,
    private readonly claim: Omit<ClaimRequest, 'count'>,
    private readonly log: Log,
    private readonly outage: OutageLog,
    private readonly holders: RunHolders = new Map(),
    /** a resolution of this run heard in the last moments, when no stream held it (WorkerStreams' memory) */
    private readonly takenRecently: (key: string) => ResolvedRun | undefined = () => undefined,
  ) {
    this.queue = `${claim.provisionerId}/${claim.workerType}`;
    const drainsAt = Math.min(Date.now() + deps.config.workerStreamMaxAgeMs, auth.validUntil ?? Infinity);
    this.done = new Promise((resolve) => ws.once('close', () => resolve()));
    ws.on('close', () => this.onClose());
    ws.on('message', (data, isBinary) => this.onFrame(data as Buffer, isBinary));
    ws.on('error', () => ws.terminate());
    let answered = true;
    ws.on('pong', () => (answered = true));
    this.timers.push(
      setInterval(() => {
        if (!answered) return ws.terminate();
        answered = false;
        ws.ping();
      }, PING_EVERY_MS),
      setTimeout(() => this.drain(auth.validUntil !== undefined && auth.validUntil <= drainsAt ? 'its credentials expire' : 'it reached its maximum age (TGS_WORKER_STREAM_MAX_AGE_S)'), Math.min(MAX_TIMER_MS, Math.max(0, drainsAt - Date.now()))),
    );
    this.send(welcome(this.queue, claim.workerGroup, claim.workerId, drainsAt));
    this.claiming = this.claimLoop().catch((err: unknown) => {
      log.warn({ err, ...claim }, 'worker stream: claiming failed; closing the stream (the worker opens another)');
      ws.close(1011, 'internal error');
    });
  }

  /**
   * No more claims on this stream: the worker is told to open a new one (and send its later reports there). The
   * resolves it sent before are still answered; the worker closes the stream, or the API does after DRAIN_GRACE_MS.
   */
  drain(reason: string): Promise<void> {
    if (!this.draining && !this.closed) {
      this.draining = true;
      this.wake.abort();
      // told once its last claim is pushed: after `draining` no claim comes on this stream
      void this.claiming.then(() => {
        if (this.closed) return;
        this.send({ type: 'draining', reason });
        this.timers.push(
          setTimeout(async () => {
            await Promise.all([...this.resolving]);
            this.ws.close(CLOSE.drained, 'drained');
          }, DRAIN_GRACE_MS),
        );
      });
    }
    return this.done;
  }

  private send(frame: ApiFrame): boolean {
    if (this.ws.readyState !== this.ws.OPEN) return false;
    this.ws.send(JSON.stringify(frame));
    return true;
  }

  /**
   * Someone other than the worker resolved these runs (docs/api.md § The worker stream, `canceled`): those this
   * stream holds are sent in one `canceled` frame and held no more. Runs it does not hold are none of its business.
   */
  runsTaken(runs: ResolvedRun[]): void {
    const mine = runs.filter((r) => {
      const key = runKey(r.taskId, r.runId);
      if (this.adopting.has(key)) this.adopting.set(key, r);
      return this.release(key);
    });
    if (mine.length > 0) this.send({ type: 'canceled', runs: mine });
  }

  /**
   * A `holding` frame: runs the worker was given on an earlier stream (this API's or another's) and still runs. Each
   * one the queue shows claimed by this very worker is held here from now on; one already resolved by someone else
   * (canceled meanwhile) is told at once; any other (another worker's, unknown) is ignored.
   */
  private async adopt(runs: { taskId: string; runId: number }[]): Promise<void> {
    const keys = [...new Set(runs.map((r) => runKey(r.taskId, r.runId)))].filter((k) => !this.held.has(k) && !this.adopting.has(k));
    for (const key of keys) {
      this.adopting.set(key, undefined);
      if (!this.holders.has(key)) this.holders.set(key, this);
    }
    const taken: ResolvedRun[] = [];
    try {
      const rows = new Map((await loadTasks(this.deps.pool, [...new Set(runs.map((r) => r.taskId))])).map((row) => [row.task_id, row]));
      for (const key of keys) {
        if (this.closed) break;
        const noticed = this.adopting.get(key);
        const [taskId, runIdText] = key.split('/');
        const row = rows.get(taskId);
        const run = row?.runs[Number(runIdText)];
        const ours = row && run && `${row.provisioner_id}/${row.worker_type}` === this.queue && run.workerGroup === this.claim.workerGroup && run.workerId === this.claim.workerId;
        this.adopting.delete(key);
        if (!ours) continue;
        if (noticed) taken.push(noticed);
        else if (run.state === 'running') this.hold(key);
        else if (run.state === 'exception' && !(EXCEPTION_REASONS as readonly string[]).includes(run.reasonResolved ?? '')) {
          taken.push({ taskId, runId: run.runId, reasonResolved: run.reasonResolved ?? 'canceled' });
        }
      }
    } catch (err) {
      this.log.warn({ err, ...this.claim }, 'worker stream: could not read the runs a worker holds; it hears of their cancels at its next reclaim or report');
    } finally {
      for (const key of keys) {
        this.adopting.delete(key);
        if (!this.held.has(key) && this.holders.get(key) === this) this.holders.delete(key);
      }
    }
    if (taken.length > 0) this.send({ type: 'canceled', runs: taken });
  }

  private hold(key: string): void {
    this.held.add(key);
    this.holders.set(key, this);
  }

  /** true when this stream held the run */
  private release(key: string): boolean {
    if (!this.held.delete(key)) return false;
    if (this.holders.get(key) === this) this.holders.delete(key);
    return true;
  }

  private onClose(): void {
    this.closed = true;
    for (const key of [...this.held]) this.release(key);
    this.draining = true;
    this.wake.abort();
    for (const t of this.timers) clearTimeout(t);
  }

  private onFrame(data: Buffer, isBinary: boolean): void {
    let frame: WorkerFrame;
    try {
      frame = parseWorkerFrame(data, isBinary);
    } catch (err) {
      return this.refuse(err);
    }
    if (frame.type === 'stop') {
      // the worker is stopping: nothing more is claimed for it here (a claim already under way is still pushed)
      this.capacity = 0;
      return;
    }
    if (frame.type === 'capacity') {
      if (this.capacity + frame.tasks > MAX_STREAM_CAPACITY) {
        return this.refuse(new TgsError('InputError', `capacity ${this.capacity} + ${frame.tasks} is over the stream's ${MAX_STREAM_CAPACITY}: ask only for what you can run`));
      }
      this.capacity += frame.tasks;
      this.wake.abort();
      return;
    }
    // a holding frame reads the queue as a resolve does: both count toward the frames being handled
    const work = frame.type === 'holding' ? this.adopt(frame.runs) : this.resolve(frame.id, frame.resolutions);
    const p = work.finally(() => {
      this.resolving.delete(p);
      if (this.resolving.size < MAX_RESOLVES_IN_FLIGHT) this.ws.resume();
    });
    this.resolving.add(p);
    if (this.resolving.size >= MAX_RESOLVES_IN_FLIGHT) this.ws.pause();
  }

  /** A frame that is not the protocol's: the worker is told why, and the stream ends. */
  private refuse(err: unknown): void {
    const tgsError = toTgsError(err);
    this.send({ type: 'error', code: tgsError.code, message: tgsError.message });
    this.ws.close(CLOSE.protocolError, 'protocol error');
  }

  private async resolve(id: number, resolutions: Resolution[]): Promise<void> {
    // the worker is done with these runs, whatever the answer: a cancel meanwhile has nothing left to stop
    for (const r of resolutions) this.release(runKey(r.taskId, r.runId));
    try {
      const scopes = await resolutionsScopes(this.deps.pool, resolutions, (scope) => expressionSatisfied(this.auth.scopes, scope));
      requireScopes(this.auth.clientId, this.auth.scopes, scopes);
      const results = await resolveRuns(this.deps.pool, this.deps.config, this.deps.groupAnnouncer, resolutions);
      logResolutions(this.log, resolutions, results);
      this.send({ type: 'resolved', id, resolutions: results });
    } catch (err) {
      const tgsError = toTgsError(err);
      if (tgsError.code === 'InternalServerError') this.log.warn({ err, ...this.claim }, 'worker stream: resolving failed');
      this.send({ type: 'resolved', id, error: { code: tgsError.code, message: tgsError.message } });
    }
  }

  /** Claims while the worker has capacity and the queue has work, waiting for either as claimWork's long-poll does. */
  private async claimLoop(): Promise<void> {
    const { claimWaiter: waiter } = this.deps;
    let seen = 0;
    while (!this.draining && !waiter.stopped) {
      if (this.capacity === 0) {
        await this.sleep(Infinity);
        continue;
      }
      const generation = waiter.generation(this.queue);
      const request: ClaimRequest = { ...this.claim, count: Math.min(this.capacity, MAX_CLAIM_COUNT) };
      let claimed: ClaimedRun[];
      try {
        claimed = await claimPending(this.deps.pool, this.deps.config, this.deps.issuer.current, request);
        this.outage.recovered('claiming again');
      } catch (err) {
        this.outage.failed(err as Error, 'worker streams claim again every second until it is back');
        await this.sleep(1000);
        continue;
      }
      if (claimed.length > 0) {
        this.capacity -= claimed.length;
        if (!this.send({ type: 'claimed', tasks: claimed })) return this.handBack(claimed);
        for (const t of claimed) this.hold(runKey(t.status.taskId, t.runId));
        // canceled between the claim's commit and now: the notification came before the stream held the run
        const missed = claimed.flatMap((t) => this.takenRecently(runKey(t.status.taskId, t.runId)) ?? []);
        if (missed.length > 0) this.runsTaken(missed);
        recordClaims(this.log, this.deps.workers, request, claimed);
        seen = Date.now();
        continue;
      }
      if (Date.now() - seen >= SEEN_EVERY_MS) {
        this.deps.workers.workerSeen(this.queue, this.claim.workerGroup, this.claim.workerId);
        seen = Date.now();
      }
      const signal = this.armWake();
      if (!signal) return;
      await waiter.wait(this.queue, Date.now() + this.deps.config.claimWorkWaitMs, signal, generation);
    }
  }

  /** A fresh signal for the claim loop's next wait (capacity, a drain or the close aborts it); none once draining. */
  private armWake(): AbortSignal | undefined {
    this.wake = new AbortController();
    return this.draining ? undefined : this.wake.signal;
  }

  private sleep(ms: number): Promise<void> {
    const signal = this.armWake();
    if (!signal) return Promise.resolve();
    return new Promise((resolve) => {
      const timer = ms === Infinity ? undefined : setTimeout(resolve, ms);
      signal.addEventListener('abort', () => (clearTimeout(timer), resolve()), { once: true });
    });
  }

  /**
   * Runs claimed just as the stream closed reach no worker: they are resolved exception `worker-shutdown` at once, so
   * the queue retries them now instead of when their claim expires (TGS_CLAIM_TIMEOUT, 20 minutes by default).
   */
  private async handBack(claimed: ClaimedRun[]): Promise<void> {
    const resolutions = claimed.map((t) => ({ taskId: t.status.taskId, runId: t.runId, outcome: 'exception' as const, reason: 'worker-shutdown' as const }));
    try {
      await resolveRuns(this.deps.pool, this.deps.config, this.deps.groupAnnouncer, resolutions);
      this.log.info({ ...this.claim, runs: resolutions.length }, 'worker stream closed as it claimed: runs resolved worker-shutdown');
    } catch (err) {
      this.log.warn({ err, ...this.claim }, 'worker stream closed as it claimed: the runs stay claimed until their claim expires');
    }
  }
}
