/**
 * A task's log as it grows: stdout and stderr interleaved in arrival order, plus the worker's own lines.
 * Bounded: past `maxBytes`, the first `headBytes` stay and the oldest of the rest is dropped (with a marker),
 * so a chatty task never outgrows the artifact size limit.
 */
export class LiveLog {
  private head: Buffer[] = [];
  private headLength = 0;
  private tail: Buffer[] = [];
  private tailLength = 0;
  private dropped = 0;
  /** bumps on every append, so an uploader knows whether there is something new */
  version = 0;

  constructor(
    private readonly maxBytes = 16 * 1024 * 1024,
    private readonly headBytes = 1024 * 1024,
  ) {}

  append(chunk: Buffer | string): void {
    let buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk;
    if (buf.length === 0) return;
    this.version++;
    if (this.headLength < this.headBytes) {
      const take = Math.min(buf.length, this.headBytes - this.headLength);
      this.head.push(buf.subarray(0, take));
      this.headLength += take;
      buf = buf.subarray(take);
      if (buf.length === 0) return;
    }
    this.tail.push(buf);
    this.tailLength += buf.length;
    const tailMax = this.maxBytes - this.headBytes;
    while (this.tailLength > tailMax && this.tail.length > 0) {
      const first = this.tail[0];
      const excess = this.tailLength - tailMax;
      if (first.length <= excess) {
        this.tail.shift();
        this.tailLength -= first.length;
        this.dropped += first.length;
      } else {
        this.tail[0] = first.subarray(excess);
        this.tailLength -= excess;
        this.dropped += excess;
      }
    }
  }

  /** A line from the worker itself, marked so it stands out from the command's output. */
  note(line: string): void {
    this.append(`[tgs-shell-worker ${new Date().toISOString()}] ${line}\n`);
  }

  bytes(): Buffer {
    const marker = this.dropped > 0 ? [Buffer.from(`\n[tgs-shell-worker] … ${this.dropped} bytes of log dropped (log limit ${this.maxBytes} bytes) …\n`)] : [];
    return Buffer.concat([...this.head, ...marker, ...this.tail]);
  }
}
