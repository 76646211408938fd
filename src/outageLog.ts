/**
 * One log line when a dependency (RabbitMQ, Postgres, Temporal) becomes unreachable and one when it is back,
 * however many attempts fail in between: a process retrying every 200 ms through a one-minute RabbitMQ restart
 * used to write ~300 lines; now it writes two.
 */
export class OutageLog {
  private since: number | undefined;
  private failures = 0;

  constructor(
    private readonly log: (line: string) => void,
    /** what is unreachable, as the log line names it, e.g. `bridge: RabbitMQ` */
    private readonly what: string,
  ) {}

  get down(): boolean {
    return this.since !== undefined;
  }

  /** A failed attempt: logged only if it starts an outage. */
  failed(err: unknown, consequence = 'retrying'): void {
    this.failures++;
    if (this.since !== undefined) return;
    this.since = Date.now();
    this.log(`${this.what} unavailable (${err instanceof Error ? err.message : String(err)}); ${consequence}`);
  }

  /** A successful attempt: logged only if it ends an outage. */
  recovered(detail = ''): void {
    if (this.since === undefined) return;
    const seconds = ((Date.now() - this.since) / 1000).toFixed(1);
    this.log(`${this.what} back after ${seconds} s (${this.failures} failed attempt(s))${detail ? `; ${detail}` : ''}`);
    this.since = undefined;
    this.failures = 0;
  }
}
