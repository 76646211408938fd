/**
 * The JSON log's way to stdout: the lines of one turn of the event loop in one write. The API logs a line for each
 * task claimed and each run resolved, and every line had been its own synchronous write to stdout: 44 µs of the API's
 * CPU a reportCompleted call went to its line (34 µs of it the write), a tenth of the call's (a CPU profile over
 * 4,000 reports, docs/bench-journal/2026-11-28.md § Late morning of 2026-11-28). A claim's lines and the reports
 * that share a statement now go out together. Lines are still written synchronously, in order, at the end of the turn
 * that logged them, and whatever is waiting when the process exits (a fatal line before `process.exit`) is written then:
 * only a process killed outright loses a line, and only one from its last turn.
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
