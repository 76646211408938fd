import { TgsApiError, type Resolution, type ResolutionResult, type TgsClient } from '../client/tgsClient.js';
import { errorStatus } from '../errors.js';

/**
 * How long a report waits for others to go out with it. A lone task's report is late by this much; reports of
 * a worker's tasks that end together (a fan-out of short tasks) share one request instead of one each.
 */
export const REPORT_BATCH_DELAY_MS = 5;

interface Waiting {
  item: Resolution;
  single: () => Promise<unknown>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

/**
 * The worker's reports, sent together through reportResolutions with the worker's own client: a batch goes
 * out when `maxItems` reports wait (every task the worker runs has ended) or REPORT_BATCH_DELAY_MS after the
 * first. Each report settles as its single call would: resolved, or rejected with a TgsApiError carrying the
 * item's own refusal (404, 409) or the batch's failure (a network error, a 5xx: the caller retries).
 *
 * A least-privilege worker client (`queue:claim-work:…`, `queue:worker-id:…`) may batch: an item is authorized by
 * the worker-id of the worker that claimed its run. When the batch itself is refused — 404 (a server without the
 * endpoint), 401/403 (an older server, which asks `queue:resolve-task:` scopes of every item) — nothing was resolved: those reports, and every later one, go out as the single Taskcluster calls, signed
 * with their run's credentials (`single`).
 */
export class ReportBatcher {
  private waiting: Waiting[] = [];
  private timer: NodeJS.Timeout | undefined;

  constructor(
    /** the worker's own client (or its worker stream); undefined: every report is a single call */
    private client: Pick<TgsClient, 'reportResolutions'> | undefined,
    private readonly maxItems: number,
    private readonly log: (line: string) => void,
  ) {}

  /** Reports one run; `single` makes the single call (reportCompleted / reportFailed / reportException). */
  report(item: Resolution, single: () => Promise<unknown>): Promise<void> {
    if (!this.client) return single().then(() => undefined);
    return new Promise<void>((resolve, reject) => {
      this.waiting.push({ item, single, resolve, reject });
      if (this.waiting.length >= this.maxItems) this.flush();
      else this.timer ??= setTimeout(() => this.flush(), REPORT_BATCH_DELAY_MS);
    });
  }

  private flush(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const batch = this.waiting;
    this.waiting = [];
    if (batch.length > 0) void this.send(batch);
  }

  private async send(batch: Waiting[]): Promise<void> {
    const client = this.client;
    if (!client) return this.singles(batch);
    let results: ResolutionResult[];
    try {
      results = await client.reportResolutions(batch.map((w) => w.item));
    } catch (err) {
      if (!(err instanceof TgsApiError && (err.status === 404 || err.status === 401 || err.status === 403))) {
        for (const w of batch) w.reject(err);
        return;
      }
      if (this.client) this.log(`reporting each run with its own call from now on: the batch of reports was refused (${err.status} ${err.message})`);
      this.client = undefined;
      return this.singles(batch);
    }
    for (const [i, w] of batch.entries()) {
      const result = results[i];
      if ('status' in result) w.resolve();
      else w.reject(new TgsApiError(errorStatus[result.error.code] ?? 500, result.error.code, result.error.message, result));
    }
  }

  private singles(batch: Waiting[]): void {
    for (const w of batch) w.single().then(() => w.resolve(), w.reject);
  }
}
