import type { Command } from 'commander';
import { readFileSync } from 'node:fs';
import { hostname, userInfo } from 'node:os';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import slugid from 'slugid';
import { describeApiError, requireCredentials, resolveCredentials, type ResolvedCredentials } from '../../client/credentials.js';
import { GraphNotFinishedError, TgsClient, type GraphInfo, type GraphTask, type TaskGraph, type TaskGraphNode } from '../../client/tgsClient.js';

const LIVE_LOG = 'public/logs/live.log';
const TASK_STATES = ['completed', 'running', 'pending', 'unscheduled', 'failed', 'exception'] as const;

/** Runs `fn` with a client for the resolved root URL, turning API failures into messages that say what to do next. */
export async function withClient<T>(resolved: ResolvedCredentials, fn: (client: TgsClient) => Promise<T>): Promise<T> {
  try {
    return await fn(new TgsClient({ rootUrl: resolved.rootUrl, credentials: resolved.credentials }));
  } catch (err) {
    if (err instanceof GraphNotFinishedError) throw err;
    throw new Error(describeApiError(err, resolved));
  }
}

const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 7 * 86400, mo: 30 * 86400, y: 365 * 86400 };

function unitOf(word: string): number | undefined {
  const w = word.toLowerCase();
  if (/^(s|secs?|seconds?)$/.test(w)) return UNIT_SECONDS.s;
  if (/^(m|mins?|minutes?)$/.test(w)) return UNIT_SECONDS.m;
  if (/^(h|hrs?|hours?)$/.test(w)) return UNIT_SECONDS.h;
  if (/^(d|days?)$/.test(w)) return UNIT_SECONDS.d;
  if (/^(w|weeks?)$/.test(w)) return UNIT_SECONDS.w;
  if (/^(mo|months?)$/.test(w)) return UNIT_SECONDS.mo;
  if (/^(y|years?)$/.test(w)) return UNIT_SECONDS.y;
  return undefined;
}

/** json-e's `$fromNow`: `"2 hours"`, `"1 day 30 minutes"`, `"-15 min"` → an ISO date relative to `now`. */
export function fromNow(spec: string, now: number): string {
  const m = /^\s*(-)?\s*((?:\d+\s*[a-zA-Z]+\s*)+)$/.exec(spec);
  let seconds = 0;
  if (m) {
    for (const [, n, unit] of m[2].matchAll(/(\d+)\s*([a-zA-Z]+)/g)) {
      const u = unitOf(unit);
      if (u === undefined) throw new Error(`{"$fromNow": ${JSON.stringify(spec)}}: unknown unit ${JSON.stringify(unit)} (use seconds, minutes, hours, days, weeks, months or years)`);
      seconds += Number(n) * u;
    }
  } else {
    throw new Error(`{"$fromNow": ${JSON.stringify(spec)}}: write a duration like "2 hours" or "1 day 30 minutes"`);
  }
  return new Date(now + (m[1] ? -1 : 1) * seconds * 1000).toISOString();
}

/** Replaces every `{"$fromNow": "<duration>"}` in the value. */
function resolveFromNow(value: unknown, now: number): unknown {
  if (Array.isArray(value)) return value.map((v) => resolveFromNow(v, now));
  if (value === null || typeof value !== 'object') return value;
  const record = value as Record<string, unknown>;
  const keys = Object.keys(record);
  if (keys.length === 1 && keys[0] === '$fromNow' && typeof record.$fromNow === 'string') return fromNow(record.$fromNow, now);
  return Object.fromEntries(keys.map((k) => [k, resolveFromNow(record[k], now)]));
}

/**
 * What the CLI adds to a graph file before submitting it, so example files need no timestamps:
 * `{"$fromNow": "..."}` anywhere becomes a date; a task without `created` gets now, without `deadline` now + 1 day;
 * missing `metadata` fields become the label, the graph's description/owner, and `source` the graph's page.
 */
export function withTaskDefaults(
  tasks: Record<string, TaskGraphNode>,
  defaults: { now: number; owner: string; source: string; description?: string },
): Record<string, TaskGraphNode> {
  const out: Record<string, TaskGraphNode> = {};
  for (const [label, node] of Object.entries(resolveFromNow(tasks, defaults.now) as Record<string, TaskGraphNode>)) {
    if (node === null || typeof node !== 'object' || node.task === null || typeof node.task !== 'object' || Array.isArray(node.task)) {
      out[label] = node; // the server names the label and what is wrong with it
      continue;
    }
    const task = { ...node.task };
    task.created ??= new Date(defaults.now).toISOString();
    task.deadline ??= new Date(defaults.now + 86400_000).toISOString();
    const metadata = typeof task.metadata === 'object' && task.metadata !== null ? (task.metadata as Record<string, unknown>) : {};
    task.metadata = {
      name: label,
      description: defaults.description ?? `task ${label}`,
      owner: defaults.owner,
      source: defaults.source,
      ...metadata,
    };
    out[label] = { ...node, task };
  }
  return out;
}

/** Reads a graph (or extension) file: JSON, or YAML for .yml/.yaml (and anything that is not JSON). */
export function readGraphFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (err) {
    throw new Error(`cannot read ${file}: ${(err as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (err as Error).message}`);
  }
  let value: unknown;
  const yaml = /\.ya?ml$/i.test(file);
  try {
    value = yaml ? parseYaml(text) : JSON.parse(text);
  } catch (jsonErr) {
    if (yaml) throw new Error(`${file} is not valid YAML: ${(jsonErr as Error).message}`);
    try {
      value = parseYaml(text);
    } catch {
      throw new Error(`${file} is not valid JSON: ${(jsonErr as Error).message}`);
    }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value) || typeof (value as { tasks?: unknown }).tasks !== 'object') {
    throw new Error(`${file} must hold an object with "tasks": {"<label>": {"requires": [...], "reruns": N, "task": {...}}} (seed 000's task-graph format)`);
  }
  return value as Record<string, unknown>;
}

function defaultOwner(): string {
  try {
    return `${userInfo().username}@${hostname()}`;
  } catch {
    return 'tgs-cli';
  }
}

function elapsed(ms: number): string {
  const s = ms / 1000;
  if (s < 60) return `${s.toFixed(1)}s`;
  const m = Math.floor(s / 60);
  return `${m}m${String(Math.floor(s % 60)).padStart(2, '0')}s`;
}

function countsLine(info: GraphInfo): string {
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

/** Prints why the graph did not finish: the blocking tasks, their run's reason and the tail of their log. */
async function reportNotFinished(client: TgsClient, err: GraphNotFinishedError, tailLines: number): Promise<void> {
  if (err.state === 'canceled') {
    console.log(`task-graph ${err.taskGraphId} was canceled (${countsLine(err.info)})`);
    return;
  }
  const blocking = err.blocking;
  console.log(`task-graph ${err.taskGraphId} is blocked (${countsLine(err.info)})`);
  for (const task of blocking.slice(0, 3)) {
    const status = await client.taskStatus(task.taskId).catch(() => undefined);
    const run = status?.runs[status.runs.length - 1];
    const how = run ? `run ${run.runId} ${run.state}${run.reasonResolved && run.reasonResolved !== run.state ? ` (${run.reasonResolved})` : ''}` : task.state;
    console.log('');
    console.log(`blocking task: ${task.label} (${task.taskId}), ${how}${task.reruns > 0 ? `, ${task.reruns} rerun(s) used up` : ''}`);
    try {
      const log = (await client.artifact(task.taskId, LIVE_LOG, run ? { runId: run.runId } : {})).data.toString('utf8');
      const lines = log.replace(/\n$/, '').split('\n');
      const tail = lines.slice(-tailLines);
      console.log(`--- ${tail.length < lines.length ? `last ${tail.length} of ${lines.length} lines` : 'all lines'} of ${LIVE_LOG}${run ? ` (run ${run.runId})` : ''} ---`);
      console.log(tail.join('\n'));
      console.log('---');
    } catch (e) {
      console.log(`(no ${LIVE_LOG}: ${(e as Error).message})`);
    }
  }
  if (blocking.length > 3) console.log(`\n… and ${blocking.length - 3} more blocking task(s): tgs graph status ${err.taskGraphId}`);
  const first = blocking[0];
  if (first) {
    console.log('');
    console.log(`Full log: tgs task log ${first.taskId}`);
    console.log(`Rerun it: tgs graph rerun ${err.taskGraphId} ${first.label}`);
  }
}

/** Waits with live progress; exit code 0 when finished, 1 when blocked or canceled. */
async function waitAndReport(client: TgsClient, taskGraphId: string, tailLines: number): Promise<void> {
  const progress = new Progress(client, taskGraphId, process.stdout);
  const started = Date.now();
  try {
    const info = await client.waitForGraph(taskGraphId, { onProgress: (i) => progress.update(i) });
    console.log(`task-graph ${taskGraphId} finished: ${info.counts.completed ?? 0} of ${info.taskCount} tasks completed in ${elapsed(Date.now() - started)}`);
  } catch (err) {
    if (!(err instanceof GraphNotFinishedError)) throw err;
    await reportNotFinished(client, err, tailLines);
    console.error(`tgs: ${err.message}`);
    process.exitCode = 1;
  }
}

function printInfo(info: GraphInfo, url: string): void {
  console.log(`task-graph   ${info.status.taskGraphId}`);
  console.log(`state        ${info.status.state}`);
  if (info.metadata.name) console.log(`name         ${info.metadata.name}`);
  console.log(`tasks        ${countsLine(info)}`);
  if (info.blockedBy.length) console.log(`blocked by   ${info.blockedBy.join(' ')}`);
  console.log(`routing      ${info.status.routing || '-'}`);
  console.log(`scheduler    ${info.status.schedulerId}`);
  console.log(`workflow     ${info.workflowId}`);
  console.log(`created      ${info.created}`);
  console.log(`updated      ${info.updated}`);
  console.log(`page         ${url}`);
}

function printTasks(tasks: GraphTask[]): void {
  const width = Math.max('LABEL'.length, ...tasks.map((t) => t.label.length));
  console.log(`${'LABEL'.padEnd(width)}  TASK ID                 STATE        RERUNS  REQUIRES`);
  for (const t of tasks) {
    console.log(`${t.label.padEnd(width)}  ${t.taskId.padEnd(22)}  ${t.state.padEnd(11)}  ${`${t.reruns - t.rerunsLeft}/${t.reruns}`.padEnd(6)}  ${t.requires.join(' ') || '-'}`);
  }
}

interface SubmitOptions {
  wait?: boolean;
  id?: string;
  json?: boolean;
  tail: string;
}

const tailOption = ['--tail <lines>', 'with --wait: how many lines of a blocking task\'s log to print', '30'] as const;

export function registerGraphCommand(program: Command): void {
  const graph = program
    .command('graph')
    .description('submit and watch task-graphs through the scheduler API; uses TGS_ROOT_URL, TGS_CLIENT_ID, TGS_ACCESS_TOKEN');

  graph
    .command('submit <file>')
    .description(
      'submit a task-graph file (seed 000 format, JSON or YAML) and print its id and page. Tasks may leave out created ' +
        '(now), deadline (now + 1 day) and metadata; {"$fromNow": "2 hours"} anywhere becomes a date',
    )
    .option('--wait', 'show progress until the graph finishes (exit 0), blocks or is canceled (exit 1)')
    .option('--id <taskGraphId>', 'the taskGraphId to use (a slugid; default: a new one)')
    .option('--json', 'print the API answer as JSON')
    .option(...tailOption)
    .action(async (file: string, opts: SubmitOptions) => {
      const resolved = requireCredentials();
      const taskGraphId = opts.id ?? slugid.nice();
      const body = readGraphFile(file) as unknown as TaskGraph;
      const client = new TgsClient({ rootUrl: resolved.rootUrl, credentials: resolved.credentials });
      const graphMeta = (body.metadata ?? {}) as Record<string, string>;
      const graphBody: TaskGraph = {
        ...body,
        metadata: { name: path.basename(file).replace(/\.(json|ya?ml)$/i, ''), ...graphMeta },
        tasks: withTaskDefaults(body.tasks, {
          now: Date.now(),
          owner: graphMeta.owner ?? defaultOwner(),
          source: graphMeta.source ?? client.graphUrl(taskGraphId),
          description: graphMeta.name ? `a task of ${graphMeta.name}` : undefined,
        }),
      };
      const submitted = await withClient(resolved, (c) => c.submitGraph(graphBody, { taskGraphId }));
      if (opts.json) console.log(JSON.stringify(submitted, null, 2));
      else {
        console.log(`task-graph ${taskGraphId} submitted (${submitted.tasks.length} tasks)`);
        console.log(`  ${client.graphUrl(taskGraphId)}`);
      }
      if (opts.wait) await withClient(resolved, (c) => waitAndReport(c, taskGraphId, Number(opts.tail)));
    });

  graph
    .command('wait <taskGraphId>')
    .description('show progress until the graph finishes (exit 0), blocks or is canceled (exit 1)')
    .option(...tailOption)
    .action(async (taskGraphId: string, opts: { tail: string }) => {
      await withClient(resolveCredentials(), (c) => waitAndReport(c, taskGraphId, Number(opts.tail)));
    });

  graph
    .command('status <taskGraphId>')
    .description('state, task counts by state and blocking tasks')
    .option('--json', 'print the API answer as JSON')
    .action(async (taskGraphId: string, opts: { json?: boolean }) => {
      const resolved = resolveCredentials();
      await withClient(resolved, async (c) => {
        const info = await c.graphInfo(taskGraphId);
        if (opts.json) {
          console.log(JSON.stringify(info, null, 2));
          return;
        }
        printInfo(info, c.graphUrl(taskGraphId));
        for (const t of await c.blockingTasks(taskGraphId, info)) console.log(`  ${t.label} (${t.taskId}) ${t.state}`);
      });
    });

  graph
    .command('inspect <taskGraphId> [taskIdOrLabel]')
    .description('every task of the graph (label, taskId, state, reruns used, requires), or one task')
    .option('--json', 'print the API answer as JSON')
    .action(async (taskGraphId: string, taskIdOrLabel: string | undefined, opts: { json?: boolean }) => {
      await withClient(resolveCredentials(), async (c) => {
        if (taskIdOrLabel !== undefined) {
          const task = await c.inspect(taskGraphId, taskIdOrLabel);
          if (opts.json) console.log(JSON.stringify(task, null, 2));
          else {
            console.log(`label        ${task.label}`);
            console.log(`taskId       ${task.taskId}`);
            console.log(`state        ${task.state}`);
            console.log(`reruns       ${task.reruns - task.rerunsLeft} of ${task.reruns} used`);
            console.log(`requires     ${task.requires.join(' ') || '-'}`);
            console.log(`dependents   ${task.dependents.join(' ') || '-'}`);
          }
          return;
        }
        const tasks = await c.inspect(taskGraphId);
        if (opts.json) console.log(JSON.stringify(tasks, null, 2));
        else printTasks(tasks);
      });
    });

  graph
    .command('extend <taskGraphId> <file>')
    .description('add the tasks of a file ({"tasks": {...}}, JSON or YAML) to a running or blocked graph; they may require existing labels')
    .option('--json', 'print the API answer as JSON')
    .action(async (taskGraphId: string, file: string, opts: { json?: boolean }) => {
      const resolved = requireCredentials();
      const body = readGraphFile(file);
      await withClient(resolved, async (c) => {
        const tasks = withTaskDefaults(body.tasks as Record<string, TaskGraphNode>, { now: Date.now(), owner: defaultOwner(), source: c.graphUrl(taskGraphId) });
        const extended = await c.extendGraph(taskGraphId, { tasks });
        if (opts.json) console.log(JSON.stringify(extended, null, 2));
        else {
          console.log(`task-graph ${taskGraphId} extended with ${extended.tasks.length} task(s); it is ${extended.status.state}`);
          for (const t of extended.tasks) console.log(`  ${t.label}  ${t.taskId}`);
        }
      });
    });

  graph
    .command('rerun <taskGraphId> <taskIdOrLabel>')
    .description('rerun a resolved task of the graph (the graph tracks it; a blocked graph runs again)')
    .option('--reset-dependents', 'also rerun its dependents that already resolved, after it completes')
    .option('--wait', 'then show progress until the graph finishes (exit 0), blocks or is canceled (exit 1)')
    .option(...tailOption)
    .action(async (taskGraphId: string, taskIdOrLabel: string, opts: { resetDependents?: boolean; wait?: boolean; tail: string }) => {
      const resolved = requireCredentials();
      await withClient(resolved, async (c) => {
        await c.rerun(taskGraphId, taskIdOrLabel, { resetDependents: opts.resetDependents });
        console.log(`rerun of ${taskIdOrLabel} accepted${opts.resetDependents ? ' (its resolved dependents follow)' : ''}`);
        if (opts.wait) {
          // the graph leaves `blocked` once the workflow has handled the rerun
          for (let i = 0; i < 50 && (await c.graphStatus(taskGraphId)).state === 'blocked'; i++) await new Promise((r) => setTimeout(r, 100));
          await waitAndReport(c, taskGraphId, Number(opts.tail));
        }
      });
    });

  graph
    .command('cancel <taskGraphId>')
    .description('cancel every unresolved task of the graph')
    .action(async (taskGraphId: string) => {
      const resolved = requireCredentials();
      const status = await withClient(resolved, (c) => c.cancel(taskGraphId));
      console.log(`task-graph ${taskGraphId} is ${status.state}`);
    });
}
