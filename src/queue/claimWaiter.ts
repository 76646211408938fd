import { connectSession, type DbSession } from '../db/pool.js';
import { parseRunsResolved, PENDING_CHANNEL, RUNS_RESOLVED_CHANNEL, type ResolvedRun } from './notify.js';
import { OutageLog } from '../outageLog.js';

/**
 * One LISTEN connection per API process: claimWork callers wait here and are woken the moment a task of
 * their queue becomes pending. A timer backstop (default 1 s) covers a notification lost while the
 * connection was being re-established. The same session hears of claimed runs resolved by someone other than their
 * worker (RUNS_RESOLVED_CHANNEL: a cancel, a sweep) and hands them to `onRunsResolved`'s listeners, the worker
 * streams; a notification lost that way costs what it cost before: the worker finds out at its next reclaim or report.
 */
export class ClaimWaiter {
  private client: DbSession | undefined;
  private readonly waiters = new Map<string, Set<() => void>>();
  /** Notifications seen per queue: a claimer that looked before a notification must not sleep through it. */
  private readonly generations = new Map<string, number>();
  private readonly runsResolvedListeners = new Set<(runs: ResolvedRun[]) => void>();
  stopped = false;

  private readonly outage: OutageLog;
  private retry: NodeJS.Timeout | undefined;

  constructor(
    private readonly databaseUrl: string,
    private readonly backstopMs = 1000,
    log: (line: string) => void = (line) => console.error(line),
  ) {
    this.outage = new OutageLog(log, 'claimWork LISTEN session (Postgres)');
  }

  async start(): Promise<void> {
    let client: DbSession | undefined;
    try {
      client = await connectSession(this.databaseUrl);
      const session = client;
      session.on('notification', (msg) => {
        if (msg.channel === RUNS_RESOLVED_CHANNEL) this.runsResolved(msg.payload ?? '');
        else this.wake(msg.payload ?? '');
      });
      session.on('error', (err) => this.reconnect(session, err));
      session.on('end', () => this.reconnect(session));
      // one LISTEN a query: the embedded database's session (src/db/pglite.ts) reads one channel from each
      await session.query(`LISTEN ${PENDING_CHANNEL}`);
      await session.query(`LISTEN ${RUNS_RESOLVED_CHANNEL}`);
      if (this.stopped) {
        session.removeAllListeners().on('error', () => undefined);
        await session.end().catch(() => undefined);
        return;
      }
      this.client = session;
      this.outage.recovered('listening again');
      // Anything that happened while we were not listening: let every waiter look again.
      for (const queue of this.waiters.keys()) this.wake(queue);
    } catch (err) {
      this.reconnect(client, err as Error);
    }
  }

  /** The session failed (server restart, pg_terminate_backend): claimers fall back to the backstop meanwhile. */
  private reconnect(session: DbSession | undefined, err?: Error): void {
    if (this.stopped || this.retry) return;
    if (session && this.client && this.client !== session) return;
    this.client = undefined;
    // a dead pg.Client may still emit 'error': an unheard one would crash the process
    session?.removeAllListeners().on('error', () => undefined);
    session?.end().catch(() => undefined);
    this.outage.failed(err ?? new Error('connection ended'), `claimers poll every ${this.backstopMs} ms until it is back`);
    this.retry = setTimeout(() => {
      this.retry = undefined;
      void this.start();
    }, 500);
  }

  /** Calls `listener` with the runs of each RUNS_RESOLVED_CHANNEL notification; returns its removal. */
  onRunsResolved(listener: (runs: ResolvedRun[]) => void): () => void {
    this.runsResolvedListeners.add(listener);
    return () => this.runsResolvedListeners.delete(listener);
  }

  private runsResolved(payload: string): void {
    if (this.runsResolvedListeners.size === 0) return;
    const runs = parseRunsResolved(payload);
    if (runs.length === 0) return;
    for (const listener of this.runsResolvedListeners) listener(runs);
  }

  generation(taskQueueId: string): number {
    return this.generations.get(taskQueueId) ?? 0;
  }

  private wake(taskQueueId: string): void {
    this.generations.set(taskQueueId, this.generation(taskQueueId) + 1);
    const set = this.waiters.get(taskQueueId);
    if (!set) return;
    this.waiters.delete(taskQueueId);
    for (const w of set) w();
  }

  /** Resolves on a notification for the queue, after the backstop interval, or at the deadline. */
  wait(taskQueueId: string, untilMs: number, signal?: AbortSignal, sinceGeneration?: number): Promise<void> {
    return new Promise((resolve) => {
      if (this.stopped) return resolve();
      if (sinceGeneration !== undefined && this.generation(taskQueueId) !== sinceGeneration) return resolve();
      let set = this.waiters.get(taskQueueId);
      if (!set) {
        set = new Set();
        this.waiters.set(taskQueueId, set);
      }
      const done = () => {
        clearTimeout(timer);
        this.waiters.get(taskQueueId)?.delete(done);
        signal?.removeEventListener('abort', done);
        resolve();
      };
      const timer = setTimeout(done, Math.max(0, Math.min(this.backstopMs, untilMs - Date.now())));
      signal?.addEventListener('abort', done);
      set.add(done);
    });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.retry) clearTimeout(this.retry);
    for (const queue of [...this.waiters.keys()]) this.wake(queue);
    const client = this.client;
    this.client = undefined;
    client?.removeAllListeners().on('error', () => undefined);
    await client?.end().catch(() => undefined);
  }
}
