import type { Queryable } from '../db/pool.js';
import { OutageLog } from '../outageLog.js';
import type { ClientRecord } from './authenticate.js';
import { ensureIssuerClient, readIssuerClient } from './clients.js';

/**
 * How often each API process reads the issuer client `static/tgs/queue` again. Its token signs workers' per-run
 * credentials and artifact URLs; rotating it after a leak (docs/security.md) takes effect in every process within
 * this time, without a restart. One one-row read per process every 5 s.
 */
export const ISSUER_REFRESH_MS = 5000;

/** The issuer client as this process last read it, read again every ISSUER_REFRESH_MS. */
export class Issuer {
  private timer: NodeJS.Timeout | undefined;
  private readonly outage: OutageLog;

  private constructor(
    private readonly db: Queryable,
    private record: ClientRecord,
    log: (line: string) => void,
  ) {
    this.outage = new OutageLog(log, 'issuer client refresh: Postgres');
  }

  /** Creates the issuer client on a fresh database, reads it, and keeps it fresh until stop(). */
  static async start(db: Queryable, log: (line: string) => void = (line) => console.error(line)): Promise<Issuer> {
    const issuer = new Issuer(db, await ensureIssuerClient(db), log);
    issuer.timer = setInterval(() => void issuer.refresh(), ISSUER_REFRESH_MS);
    issuer.timer.unref();
    return issuer;
  }

  /** The current record: its token signs, and verifies, what the issuer signs. */
  get current(): ClientRecord {
    return this.record;
  }

  /** Reads the record now (the timer does it every ISSUER_REFRESH_MS); a failure keeps the last one. */
  async refresh(): Promise<void> {
    try {
      const fresh = await readIssuerClient(this.db);
      if (fresh) this.record = fresh;
      this.outage.recovered();
    } catch (err) {
      this.outage.failed(err, 'keeping the issuer token last read');
    }
  }

  stop(): void {
    clearInterval(this.timer);
  }
}
