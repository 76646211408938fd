/**
 * The Hawk nonces seen recently, so a replayed request is refused. Per process: a replay sent to another API
 * process is not caught (Taskcluster has the same property).
 *
 * Bounded in time and in size, O(1) per request:
 * - Entries are kept in buckets by the request's own timestamp (`ts`, seconds), `bucketSeconds` wide. A replay
 *   carries the same `ts` (it is covered by the MAC), so only one bucket is ever looked at. Hawk refuses a `ts`
 *   more than `skewSeconds` from the clock, so buckets wholly older than that can never match again and are
 *   dropped; a `ts` outside the window is not stored at all (Hawk refuses it right after this check).
 * - At most `maxEntries` are kept. Past that the oldest bucket is dropped: replay protection weakens for the
 *   oldest requests instead of the API refusing everyone. Only requests with a valid MAC reach the cache, so
 *   filling it takes valid credentials and `maxEntries` requests within the skew window.
 */
export class NonceCache {
  private readonly buckets = new Map<number, Set<string>>();
  private size = 0;

  constructor(
    private readonly skewSeconds: number,
    private readonly maxEntries = 200_000,
    private readonly bucketSeconds = 60,
  ) {}

  /** Throws when this (key, nonce, ts) was seen within the window; remembers it otherwise. */
  check(key: string, nonce: string, ts: string, nowMs = Date.now()): void {
    const tsSeconds = Number(ts);
    const nowSeconds = nowMs / 1000;
    if (!Number.isFinite(tsSeconds) || Math.abs(tsSeconds - nowSeconds) > this.skewSeconds) return;
    this.dropBefore(Math.floor((nowSeconds - this.skewSeconds) / this.bucketSeconds));
    const index = Math.floor(tsSeconds / this.bucketSeconds);
    let bucket = this.buckets.get(index);
    const id = `${nonce}\n${ts}\n${key}`;
    if (bucket?.has(id)) throw new Error('replayed nonce');
    if (!bucket) {
      bucket = new Set();
      this.buckets.set(index, bucket);
    }
    bucket.add(id);
    this.size += 1;
    while (this.size > this.maxEntries) this.dropOldest();
  }

  /** How many nonces are remembered (for tests and metrics). */
  get entries(): number {
    return this.size;
  }

  // At most 2 * skew / bucketSeconds + 1 buckets exist (31 with the defaults), so both loops are bounded.
  private dropBefore(oldest: number): void {
    for (const [index, bucket] of this.buckets) {
      if (index < oldest) {
        this.size -= bucket.size;
        this.buckets.delete(index);
      }
    }
  }

  private dropOldest(): void {
    let oldest: number | undefined;
    for (const index of this.buckets.keys()) if (oldest === undefined || index < oldest) oldest = index;
    if (oldest === undefined) return;
    this.size -= this.buckets.get(oldest)?.size ?? 0;
    this.buckets.delete(oldest);
  }
}
