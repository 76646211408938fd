import type { DbSession } from '../db/pool.js';
import { OutageLog } from '../outageLog.js';

/**
 * The relay's advisory lock: only one relay publishes at a time, so messages leave in outbox id order (docs/reliability.md).
 * The number is part of the deployed protocol: relays of different versions must compete for the same one.
 */
export const RELAY_LOCK = 7_471_020_232;
/** How often a standby tries to take the lock, and how long a failed attempt to reach Postgres waits. */
export const STANDBY_RETRY_MS = 1000;
/** After its lock session failed, how long a relay waits before taking the lock again: standbys try every 1 s. */
export const STEP_DOWN_MS = 2500;

export interface RelayLockOptions {
  /** Opens the session that holds the lock and LISTENs (connectSession of the relay's database). */
  connect: () => Promise<DbSession>;
  /** The channels the session LISTENs on, for the relay's wake-ups. */
  channels: string[];
  /** A NOTIFY arrived on one of them. */
  onNotification: (channel: string) => void;
  /** The lock was taken (true) or lost (false): the relay's `active`. */
  onActive: (active: boolean) => void;
  /** Waits `ms` or until woken early (the relay's sleep, which a stop and a NOTIFY cut short). */
  sleep: (ms: number) => Promise<unknown>;
  stopped: () => boolean;
  log: (line: string) => void;
}

/**
 * Holds the relay lock on a session of its own, and fences on it: the lock lives and dies with that session, so the
 * moment the session fails (its `error`/`end` events, or a failed round trip before a batch) the relay stops
 * publishing, at most the batch in flight overlapping the standby that takes the lock next.
 */
export class RelayLock {
  private session: DbSession | undefined;
  /** Set when the session fails: the advisory lock went with it and a standby may hold it now. */
  private lost = false;
  private readonly dbOutage: OutageLog;

  constructor(private readonly options: RelayLockOptions) {
    this.dbOutage = new OutageLog(options.log, 'Postgres (relay lock session)');
  }

  /** Whether the lock is held, as far as the session's events tell (stillHeld asks the session itself). */
  get held(): boolean {
    return this.session !== undefined && !this.lost;
  }

  /** Takes the lock, waiting while another relay holds it or Postgres is unreachable; false once stopped. */
  async acquire(): Promise<boolean> {
    const { options } = this;
    while (!options.stopped()) {
      let client: DbSession | undefined;
      try {
        client = await options.connect();
        for (;;) {
          if (options.stopped()) {
            await client.end();
            return false;
          }
          const { rows } = await client.query<{ ok: boolean }>('SELECT pg_try_advisory_lock($1) AS ok', [RELAY_LOCK]);
          this.dbOutage.recovered();
          if (rows[0].ok) break;
          await options.sleep(STANDBY_RETRY_MS);
        }
        const session = client;
        session.on('notification', (message: { channel: string }) => options.onNotification(message.channel));
        // The lock lives and dies with this session: the moment it fails, stop publishing.
        session.on('error', (err?: Error) => this.loseIf(session, err?.message ?? 'connection failed'));
        session.on('end', () => this.loseIf(session, 'connection ended'));
        // one LISTEN a statement: the embedded PGlite session takes them one at a time (src/db/pglite.ts)
        for (const channel of options.channels) await session.query(`LISTEN ${channel}`);
        this.session = session;
        this.lost = false;
        options.onActive(true);
        options.log('active (holds the relay lock)');
        return true;
      } catch (err) {
        await client?.end().catch(() => undefined);
        this.dbOutage.failed(err, 'retrying to take the relay lock');
        await options.sleep(STANDBY_RETRY_MS);
      }
    }
    return false;
  }

  /**
   * Whether this relay still holds the lock, asked of the lock session itself before every batch: a session
   * killed without a word reaching us (pg_terminate_backend, a network cut) fails this round trip, so at most
   * the batch in flight overlaps a standby that took the lock. ~0.1 ms a batch of up to 500 messages here.
   */
  async stillHeld(): Promise<boolean> {
    const session = this.session;
    if (!session || this.lost) return false;
    try {
      await session.query('SELECT 1');
      return !this.lost;
    } catch (err) {
      this.loseIf(session, (err as Error).message);
      return false;
    }
  }

  /** Ends the lock session (the lock goes with it). */
  async release(): Promise<void> {
    const old = this.session;
    this.session = undefined;
    // a dead pg.Client may still emit 'error': an unheard one would crash the process
    old?.removeAllListeners().on('error', () => undefined);
    await old?.end().catch(() => undefined);
  }

  /**
   * Waits STEP_DOWN_MS (or until stopped) before competing again: a standby tries every second, so it takes over
   * instead of this relay, whose session just failed (a flaky network or a restarting server is likelier to fail
   * it again).
   */
  async stepDown(): Promise<void> {
    const until = Date.now() + STEP_DOWN_MS;
    while (!this.options.stopped() && Date.now() < until) await this.options.sleep(until - Date.now());
  }

  /** The current session failed: the lock is lost, said once however many of its events and errors report it. */
  private loseIf(session: DbSession, reason: string): void {
    if (this.session !== session || this.lost) return;
    this.lost = true;
    this.options.onActive(false);
    this.options.log(`lost the relay lock session (${reason}); stopped publishing, trying to become active again`);
  }
}
