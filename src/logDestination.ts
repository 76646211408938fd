/**
 * The JSON log's way to stdout: the lines of one turn of the event loop in one write. The API logged a line for each
 * task claimed and each run resolved (one a call and one a statement since), and every line had been its own
 * synchronous write to stdout: a CPU profile over 4,000 reportCompleted calls put 44 µs of samples a call in its line,
 * 34 µs of them in the write (a system call, where a sample can also be time off the CPU), and claimWork's API CPU a
 * task (/proc) went from 0.18 to 0.15 ms with one write a turn (docs/bench-journal/2026-11-28.md § Late morning of
 * 2026-11-28). The lines of one turn's claims and report statements go out together. Lines are still written
 * synchronously, in order, at the end of the turn that logged them, and whatever is waiting when the process exits (a
 * fatal line before `process.exit`) is written then: only a process killed outright loses a line, and only one from
 * its last turn.
 */
export class TurnBufferedDestination {
  private lines: string[] = [];
  private due = false;

  constructor(private readonly out: { write(text: string): unknown }) {
    process.on('exit', () => this.flush());
  }

  write(line: string): void {
    this.lines.push(line);
    if (this.due) return;
    this.due = true;
    setImmediate(() => this.flush());
  }

  /** Writes what waits, in one write (pino's `logger.flush(cb)` calls it with a callback). */
  flush(cb?: (err?: Error) => void): void {
    this.due = false;
    if (this.lines.length > 0) {
      const text = this.lines.length === 1 ? this.lines[0] : this.lines.join('');
      this.lines = [];
      this.out.write(text);
    }
    cb?.();
  }
}
