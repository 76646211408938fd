// How the CLI shows a graph while it waits for it: `tgs graph --wait` and `tgs dev`.
import type { GraphInfo, GraphTask, TgsClient } from '../client/tgsClient.js';

const TASK_STATES = ['completed', 'running', 'pending', 'unscheduled', 'failed', 'exception'] as const;

/** `4.2s`, `3m07s`. */
export function elapsed(ms: number): string {
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  return `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
}

/** `12 tasks: 7 completed, 2 running, …` (states with no task left out, but for completed). */
export function countsLine(info: GraphInfo): string {
  const parts = TASK_STATES.filter((s) => (info.counts[s] ?? 0) > 0 || s === 'completed').map((s) => `${info.counts[s] ?? 0} ${s}`);
  return `${info.taskCount} tasks: ${parts.join(', ')}`;
}

/**
 * `--wait`'s progress: counts by state, what is running, elapsed time. On a TTY the block is redrawn in place;
 * otherwise one plain line per change.
 */
export class Progress {
  private lastLines = 0;
  private lastPlain = '';
  private running: GraphTask[] = [];
  private runningKey = '';

  constructor(
    private readonly client: TgsClient,
    private readonly taskGraphId: string,
    private readonly out: NodeJS.WriteStream,
    private readonly started = Date.now(),
  ) {}

  async update(info: GraphInfo): Promise<void> {
    // Which tasks run: read only when the counts moved, and only for graphs small enough to list.
    const key = JSON.stringify(info.counts);
    if (key !== this.runningKey) {
      this.runningKey = key;
      this.running = (info.counts.running ?? 0) > 0 && info.taskCount <= 2000
        ? (await this.client.inspect(this.taskGraphId)).filter((t) => t.state === 'running')
        : [];
    }
    const names = this.running.map((t) => t.label);
    const runningText = names.length ? `running: ${names.slice(0, 10).join(', ')}${names.length > 10 ? ` (+${names.length - 10} more)` : ''}` : '';
    const time = elapsed(Date.now() - this.started);
    if (this.out.isTTY) {
      const width = Math.max(20, (this.out.columns ?? 100) - 1);
      const lines = [`task-graph ${this.taskGraphId} · ${info.status.state} · ${time}`, `  ${countsLine(info)}`];
      if (runningText) lines.push(`  ${runningText}`);
      const clear = this.lastLines > 0 ? `\x1b[${this.lastLines}A\x1b[J` : '';
      this.out.write(clear + lines.map((l) => (l.length > width ? `${l.slice(0, width - 1)}…` : l)).join('\n') + '\n');
      this.lastLines = lines.length;
      return;
    }
    const plain = `${info.status.state} · ${countsLine(info)}${runningText ? ` · ${runningText}` : ''}`;
    if (plain !== this.lastPlain) {
      this.out.write(`[${time}] ${plain}\n`);
      this.lastPlain = plain;
    }
  }
}
