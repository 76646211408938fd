import type { Command } from 'commander';
import { resolveCredentials } from '../../client/credentials.js';
import type { GraphTask, TgsClient } from '../../client/tgsClient.js';
import { isResolved } from '../../taskStates.js';
import { withIds } from '../ids.js';
import { readLog } from '../liveLog.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** What has been printed of one task's log: which run, how many bytes, and the line not ended yet. */
interface Printed {
  runId: number;
  bytes: number;
  partial: string;
}

/**
 * Every task's log of a graph, each line prefixed with its task's label (like `argo logs`). Without `follow`: the
 * latest run's log of each task that has one, task by task. With `follow`: what is there, then every line as it
 * is uploaded (the worker uploads the whole log every few seconds; a task is read again only while it runs or when
 * its state changed), run after run, until the graph is no longer running.
 */
class GraphLogs {
  private readonly printed = new Map<string, Printed>();
  private readonly seenState = new Map<string, string>();
  private width = 0;

  constructor(
    private readonly client: TgsClient,
    private readonly taskGraphId: string,
    private readonly out: NodeJS.WritableStream,
  ) {}

  private write(label: string, text: string): void {
    this.out.write(text.split('\n').map((line) => `${label.padEnd(this.width)} | ${line}\n`).join(''));
  }

  /** Prints what is new in `task`'s log; `final` also prints a last line without its newline. */
  private async readTask(task: GraphTask, follow: boolean): Promise<void> {
    const status = await this.client.taskStatus(task.taskId);
    const latest = status.runs[status.runs.length - 1];
    if (!latest) return;
    let at = this.printed.get(task.taskId) ?? { runId: follow ? 0 : latest.runId, bytes: 0, partial: '' };
    for (;;) {
      const run = status.runs[at.runId];
      const log = await readLog(this.client, task.taskId, at.runId);
      if (log && log.length > at.bytes) {
        const text = at.partial + log.subarray(at.bytes).toString('utf8');
        const end = text.lastIndexOf('\n');
        if (end >= 0) this.write(task.label, text.slice(0, end));
        at = { ...at, bytes: log.length, partial: text.slice(end + 1) };
      }
      const done = isResolved(run.state) || !follow;
      if (done && at.partial) {
        this.write(task.label, at.partial);
        at = { ...at, partial: '' };
      }
      if (follow && isResolved(run.state) && status.runs.length > at.runId + 1) {
        this.write(task.label, `(run ${run.runId} ${run.state}${run.reasonResolved && run.reasonResolved !== run.state ? `, ${run.reasonResolved}` : ''}; run ${at.runId + 1} follows)`);
        at = { runId: at.runId + 1, bytes: 0, partial: '' };
        continue;
      }
      break;
    }
    this.printed.set(task.taskId, at);
  }

  /** One pass over the graph's tasks: those that ran (without follow), or those running or changed (with follow). */
  async pass(follow: boolean): Promise<void> {
    const tasks = await this.client.inspect(this.taskGraphId);
    this.width = Math.min(30, Math.max(this.width, ...tasks.map((t) => t.label.length)));
    for (const task of tasks) {
      if (task.state === 'unscheduled' || task.state === 'missing') continue;
      const changed = this.seenState.get(task.taskId) !== task.state;
      this.seenState.set(task.taskId, task.state);
      if (!follow || changed || task.state === 'running' || task.state === 'pending') await this.readTask(task, follow);
    }
  }

  async follow(): Promise<string> {
    for (;;) {
      const state = (await this.client.graphStatus(this.taskGraphId)).state;
      await this.pass(true);
      if (state !== 'running') return state;
      await sleep(1000);
    }
  }
}

export function registerGraphLogsCommand(graph: Command): void {
  graph
    .command('logs <taskGraphId>')
    .description('every task\'s log (latest run), each line prefixed with its label; -f follows them until the graph stops running')
    .option('-f, --follow', 'keep printing as the logs grow, run after run, until the graph finishes, blocks or is canceled')
    .action(async (taskGraphId: string, opts: { follow?: boolean }) => {
      await withIds(resolveCredentials(), { taskGraphId }, async (c) => {
        const logs = new GraphLogs(c, taskGraphId, process.stdout);
        if (!opts.follow) {
          await logs.pass(false);
          return;
        }
        const state = await logs.follow();
        process.stderr.write(`tgs: task-graph ${taskGraphId} is ${state}\n`);
      });
    });
}
