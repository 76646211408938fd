import { connectSession, type DbSession } from '../db/pool.js';
import { PENDING_CHANNEL } from './notify.js';

/**
 * One LISTEN connection per API process: claimWork callers wait here and are woken the moment a task of
 * their queue becomes pending. A timer backstop (default 1 s) covers a notification lost while the
 * connection was being re-established.
 */
export class ClaimWaiter {
  private client: DbSession | undefined;
  private readonly waiters = new Map<string, Set<() => void>>();
  /** Notifications seen per queue: a claimer that looked before a notification must not sleep through it. */
  private readonly generations = new Map<string, number>();
  stopped = false;

  constructor(private readonly databaseUrl: string, private readonly backstopMs = 1000) {}

  async start(): Promise<void> {
    try {
      const client = await connectSession(this.databaseUrl);
      client.on('notification', (msg) => this.wake(msg.payload ?? ''));
      client.on('error', () => this.reconnect());
      client.on('end', () => this.reconnect());
      await client.query(`LISTEN ${PENDING_CHANNEL}`);
      this.client = client;
      // Anything that happened while we were not listening: let every waiter look again.
      for (const queue of this.waiters.keys()) this.wake(queue);
    } catch {
      this.reconnect();
    }
  }

  private reconnect(): void {
    if (this.stopped) return;
    const old = this.client;
    this.client = undefined;
    old?.removeAllListeners();
    old?.end().catch(() => undefined);
    setTimeout(() => void this.start(), 500);
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
    for (const queue of [...this.waiters.keys()]) this.wake(queue);
    const client = this.client;
    this.client = undefined;
    client?.removeAllListeners();
    await client?.end().catch(() => undefined);
  }
}
