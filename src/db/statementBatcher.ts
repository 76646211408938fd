/**
 * Group commit for one statement that many callers run at once: while `lanes` of it are in flight, further items wait,
 * and when a lane frees they go together as one statement. A caller alone runs at once, as it would without the batcher;
 * under load, each statement takes whatever arrived during the one before it, so the batch grows with the load and its
 * round trip, planning, commit and per-call parsing are shared. Items with the same key never share a statement, nor
 * run in two at once (a statement that changes each row once): the later one waits for the next, in arrival order.
 *
 * With `gatherTurn`, an item that finds a lane free waits for the end of the event loop's turn before it goes, so the
 * items that arrive in one turn (the requests read off the sockets in one poll) share a statement instead of the first
 * two going alone; a caller alone then waits one turn.
 *
 * `run` answers one result for each item, in their order; if it throws, every item of that statement gets its error.
 */
export class StatementBatcher<I, R> {
  private queued: { item: I; resolve: (result: R) => void; reject: (err: unknown) => void }[] = [];
  private inFlight = 0;
  /** the keys of the items in the statements in flight */
  private readonly busy = new Set<string>();
  /** gatherTurn: a `next` is due at the end of this turn */
  private turnDue = false;

  constructor(
    private readonly run: (items: I[]) => Promise<R[]>,
    private readonly options: { lanes: number; maxItems: number; key: (item: I) => string; onBatch?: (size: number) => void; gatherTurn?: boolean },
  ) {}

  submit(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queued.push({ item, resolve, reject });
      if (!this.options.gatherTurn) this.next();
      else if (!this.turnDue && this.inFlight < this.options.lanes) {
        this.turnDue = true;
        setImmediate(() => {
          this.turnDue = false;
          this.next();
        });
      }
    });
  }

  private next(): void {
    while (this.inFlight < this.options.lanes && this.queued.length > 0) {
      const batch: typeof this.queued = [];
      const keys: string[] = [];
      const rest: typeof this.queued = [];
      // a later item of a key passed over waits too, so that the items of one key keep their order
      const passedOver = new Set<string>();
      for (const waiting of this.queued) {
        const key = this.options.key(waiting.item);
        if (batch.length < this.options.maxItems && !this.busy.has(key) && !passedOver.has(key)) {
          this.busy.add(key);
          keys.push(key);
          batch.push(waiting);
        } else {
          passedOver.add(key);
          rest.push(waiting);
        }
      }
      this.queued = rest;
      if (batch.length === 0) return;
      this.inFlight++;
      this.options.onBatch?.(batch.length);
      let ran: Promise<R[]>;
      try {
        ran = this.run(batch.map((w) => w.item));
      } catch (err) {
        ran = Promise.reject(err);
      }
      ran
        .then(
          (results) => batch.forEach((w, i) => w.resolve(results[i])),
          (err: unknown) => batch.forEach((w) => w.reject(err)),
        )
        .finally(() => {
          for (const key of keys) this.busy.delete(key);
          this.inFlight--;
          this.next();
        });
    }
  }
}
