import type { Command } from 'commander';
import path from 'node:path';
import slugid from 'slugid';
import { requireCredentials, resolveCredentials } from '../../client/credentials.js';
import { TgsClient, type AmendedGraph, type GraphInfo, type GraphTask, type TaskGraph, type TaskGraphNode } from '../../client/tgsClient.js';
import { defaultOwner, readGraphFile, withTaskDefaults } from '../graphFile.js';
import { countsLine } from '../progress.js';
import { waitAndReport, type WaitOptions } from '../waitGraph.js';
import { nextGraphCommand, printGraphExplanation } from '../explanation.js';
import { inspectOne } from '../graphTask.js';
import { checkPools, checkShellPayloads, lintGraph, poolsOf } from '../graphCheck.js';
import { withClient } from '../withClient.js';
import { withIds } from '../ids.js';
import { registerGraphListCommand } from './graphList.js';
import { registerGraphLogsCommand } from './graphLogs.js';

/** An amend's answer for people: what each class holds, what (would) run again, and what became of the graph. */
function printAmend(a: AmendedGraph): void {
  const c = a.classification;
  const list = (labels: string[]) => (labels.length > 10 ? `${labels.slice(0, 10).join(', ')}, … (+${labels.length - 10})` : labels.join(', '));
  const rerun = [...c.changed, ...c.added, ...c.dependent];
  console.log(a.dryRun ? `dry run of an amend of task-graph ${a.taskGraphId}: nothing was changed` : `task-graph ${a.taskGraphId} amended (amend #${a.amend})`);
  for (const [name, labels] of [['changed', c.changed], ['dependent (requires a changed label)', c.dependent], ['added', c.added], ['removed', c.removed], ['metadata only (patched, no rerun)', c.metadata]] as const) {
    if (labels.length > 0) console.log(`  ${name}: ${list(labels)}`);
  }
  console.log(`  unchanged: ${c.unchanged}`);
  console.log(rerun.length === 0 ? `${a.dryRun ? 'would rerun' : 'reruns'}: nothing` : `${a.dryRun ? 'would rerun' : 'reruns'} ${rerun.length} task(s): ${list(rerun)}`);
  for (const t of a.tasks) console.log(`  ${t.label}  ${t.taskId}`);
  if (a.mayBeKept.length > 0) console.log(`kept without a run if what they require comes out byte-identical (early cutoff): ${list(a.mayBeKept)}`);
  if (a.workflow === 'started') console.log(`the graph had finished: it is ${a.state} again`);
  if (a.workflow === 'not-running') console.log(`the graph's workflow is not running: resume it with tgs graph resume ${a.taskGraphId}`);
  if (!a.dryRun) console.log(`it is ${a.state}`);
}

/**
 * What submit checks first (src/cli/graphCheck.ts), printed before the API answers: errors (which the API refuses
 * too, without "did you mean") and warnings (which it accepts).
 * `full` (--check) adds the shell worker's payload schema and says when all is well. The queue's view of the pools is
 * best effort: a client that may not list workers still submits.
 */
async function checkBeforeSubmit(client: TgsClient, graph: TaskGraph, full: boolean): Promise<boolean> {
  const { errors, warnings } = lintGraph(graph as unknown as Record<string, unknown>);
  const pools = poolsOf(graph.tasks);
  const queue = await checkPools(client, pools).catch((err: unknown) => {
    if (full) warnings.push(`the queue's workers could not be read (${(err as Error).message.split('\n')[0]}): pools and payloads not checked`);
    return undefined;
  });
  if (queue) warnings.push(...queue.warnings);
  if (full && queue) errors.push(...checkShellPayloads(graph.tasks, queue.shellPools));
  for (const w of warnings) console.error(`tgs: warning: ${w}`);
  // every error here the API refuses too, naming every problem it finds: these lines add the closest names
  for (const e of errors) console.error(`tgs: error: ${e}`);
  if (full) console.log(errors.length ? `${errors.length} error(s), ${warnings.length} warning(s): fix the errors before submitting` : `${Object.keys(graph.tasks).length} task(s) checked: ${warnings.length ? `${warnings.length} warning(s), ` : ''}no errors`);
  return errors.length === 0;
}

function printInfo(info: GraphInfo, url: string): void {
  console.log(`task-graph   ${info.status.taskGraphId}`);
  console.log(`state        ${info.status.state}${info.stateReason ? ` (${info.stateReason})` : ''}`);
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

/** The options every `--wait` takes. */
interface WaitFlags {
  tail: string;
  failFast?: boolean;
  whyAfter: string;
}

function waitOptions(opts: WaitFlags): WaitOptions {
  return { tailLines: Number(opts.tail), failFast: opts.failFast, whyAfterMs: Number(opts.whyAfter) * 1000, unreachableForMs: UNREACHABLE_FOR_MS };
}

/**
 * How long `--wait` keeps trying an API it cannot reach: a `tgs dev` restarted with Ctrl-C and up again takes about
 * 25 s (19.5 s to stop and 5 s to start in the review of 2026-11-28); two minutes leaves room for a slow machine.
 */
const UNREACHABLE_FOR_MS = 120_000;

const WAIT_HELP = 'show progress until nothing more can run: exit 0 when the graph finished, 1 when it is blocked (every failure listed) or canceled';

function addWaitOptions(command: Command): Command {
  return command
    .option('--tail <lines>', 'with --wait: how many lines of a failed task\'s log to print', '30')
    .option('--fail-fast', 'with --wait: stop at the first failure, while other tasks may still run')
    .option('--why-after <seconds>', 'with --wait: when tasks have waited this long and none runs, print `tgs graph why`', '10');
}

interface SubmitOptions extends WaitFlags {
  wait?: boolean;
  check?: boolean;
  /** false with --no-cache */
  cache: boolean;
  refreshCache?: boolean;
  id?: string;
  json?: boolean;
}

export function registerGraphCommand(program: Command): void {
  const graph = program
    .command('graph')
    .description('submit and watch task-graphs through the scheduler API; uses TGS_ROOT_URL, TGS_CLIENT_ID, TGS_ACCESS_TOKEN');
  registerGraphListCommand(graph);
  registerGraphLogsCommand(graph);

  addWaitOptions(graph.command('submit <file>'))
    .description(
      'submit a task-graph file (docs/formats.md, JSON or YAML) and print its id and page. Tasks may leave out created ' +
        '(now), deadline (now + 1 day) and metadata; {"$fromNow": "2 hours"} anywhere becomes a date',
    )
    .option('--wait', WAIT_HELP)
    .option('--id <taskGraphId>', 'the taskGraphId to use (a slugid; default: a new one)')
    .option('--no-cache', 'run every cached node, and write no cache entry (the graph\'s cacheMode off)')
    .option('--refresh-cache', 'run every cached node and overwrite its cache entry (cacheMode refresh)')
    .option('--json', 'print the API answer as JSON')
    .option('--check', 'only check the file: its labels and keys, its pools (workers there?), and the payloads of tasks for shell workers; submit nothing')
    .action(async (file: string, opts: SubmitOptions) => {
      const resolved = requireCredentials();
      const taskGraphId = opts.id ?? slugid.nice();
      const body = readGraphFile(file) as unknown as TaskGraph;
      const client = new TgsClient({ rootUrl: resolved.rootUrl, credentials: resolved.credentials });
      const graphMeta = (body.metadata ?? {}) as Record<string, string>;
      const cacheMode = !opts.cache ? 'off' : opts.refreshCache ? 'refresh' : body.cacheMode;
      const graphBody: TaskGraph = {
        ...body,
        ...(cacheMode ? { cacheMode } : {}),
        metadata: { name: path.basename(file).replace(/\.(json|ya?ml)$/i, ''), ...graphMeta },
        tasks: withTaskDefaults(body.tasks, {
          now: Date.now(),
          owner: graphMeta.owner ?? defaultOwner(),
          source: graphMeta.source ?? client.graphUrl(taskGraphId),
          description: graphMeta.name ? `a task of ${graphMeta.name}` : undefined,
        }),
      };
      const ready = await checkBeforeSubmit(client, graphBody, Boolean(opts.check));
      if (opts.check) {
        if (!ready) process.exitCode = 1;
        return;
      }
      const submitted = await withClient(resolved, (c) => c.submitGraph(graphBody, { taskGraphId }));
      if (opts.json) console.log(JSON.stringify(submitted, null, 2));
      else {
        console.log(`task-graph ${taskGraphId} submitted (${submitted.tasks.length} tasks)`);
        console.log(`  ${client.graphUrl(taskGraphId)}`);
      }
      if (opts.wait) await withClient(resolved, (c) => waitAndReport(c, taskGraphId, waitOptions(opts)));
    });

  addWaitOptions(graph.command('wait <taskGraphId>'))
    .description(WAIT_HELP)
    .action(async (taskGraphId: string, opts: WaitFlags) => {
      await withIds(resolveCredentials(), { taskGraphId }, (c) => waitAndReport(c, taskGraphId, waitOptions(opts)));
    });

  graph
    .command('status <taskGraphId>')
    .description('state, task counts by state and blocking tasks')
    .option('--json', 'print the API answer as JSON')
    .action(async (taskGraphId: string, opts: { json?: boolean }) => {
      await withIds(resolveCredentials(), { taskGraphId }, async (c) => {
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
    .command('why <taskGraphId>')
    .description('why the graph has not finished: the root causes of its unresolved tasks, most explaining first')
    .option('--json', 'print the API answer as JSON')
    .option('--limit <n>', 'root causes to show (at most 999)', '20')
    .action(async (taskGraphId: string, opts: { json?: boolean; limit: string }) => {
      await withIds(resolveCredentials(), { taskGraphId }, async (c) => {
        const explanation = await c.explainGraph(taskGraphId, Number(opts.limit));
        if (opts.json) {
          console.log(JSON.stringify(explanation, null, 2));
          return;
        }
        printGraphExplanation(explanation);
        const next = await nextGraphCommand(c, explanation);
        if (next) console.log(`Run next: ${next}`);
      });
    });

  graph
    .command('inspect <taskGraphId> [taskIdOrLabel]')
    .description('every task of the graph (label, taskId, state, reruns used, requires), or one task')
    .option('--json', 'print the API answer as JSON')
    .action(async (taskGraphId: string, taskIdOrLabel: string | undefined, opts: { json?: boolean }) => {
      await withIds(resolveCredentials(), { taskGraphId }, async (c) => {
        if (taskIdOrLabel !== undefined) {
          const task = await inspectOne(c, taskGraphId, taskIdOrLabel);
          if (opts.json) console.log(JSON.stringify(task, null, 2));
          else {
            console.log(`label        ${task.label}`);
            console.log(`taskId       ${task.taskId}`);
            console.log(`state        ${task.state}`);
            console.log(`reruns       ${task.reruns - task.rerunsLeft} of ${task.reruns} used`);
            console.log(`requires     ${task.requires.join(' ') || '-'}`);
            console.log(`dependents   ${task.dependents.join(' ') || '-'}`);
            if (task.amended) console.log(`amended      ${task.amended}${task.replaces ? ` (replaces ${task.replaces})` : ''}`);
            if (task.cutoff) console.log(`cutoff       ${task.cutoff}`);
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
      await withIds(resolved, { taskGraphId }, async (c) => {
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
    .command('amend <taskGraphId> <file>')
    .description('rerun exactly what changed: give the whole edited graph file; changed labels and what depends on them get new tasks, metadata-only changes are patched (docs/formats.md § Amend)')
    .option('--dry-run', 'print the classification and what would rerun, changing nothing')
    .option('--json', 'print the API answer as JSON')
    .action(async (taskGraphId: string, file: string, opts: { dryRun?: boolean; json?: boolean }) => {
      const resolved = requireCredentials();
      const body = readGraphFile(file);
      await withClient(resolved, async (c) => {
        const tasks = withTaskDefaults(body.tasks as Record<string, TaskGraphNode>, { now: Date.now(), owner: defaultOwner(), source: c.graphUrl(taskGraphId) });
        const amended = await c.amendGraph(taskGraphId, { tasks }, { dryRun: opts.dryRun === true });
        if (opts.json) console.log(JSON.stringify(amended, null, 2));
        else printAmend(amended);
      });
    });

  addWaitOptions(graph.command('rerun <taskGraphId> <taskIdOrLabel>'))
    .description('rerun a resolved task of the graph (the graph tracks it; a blocked graph runs again)')
    .option('--reset-dependents', 'also rerun its dependents that already resolved, after it completes')
    .option('--wait', `then ${WAIT_HELP}`)
    .action(async (taskGraphId: string, taskIdOrLabel: string, opts: WaitFlags & { resetDependents?: boolean; wait?: boolean }) => {
      const resolved = requireCredentials();
      await withIds(resolved, { taskGraphId }, async (c) => {
        await c.rerun(taskGraphId, taskIdOrLabel, { resetDependents: opts.resetDependents });
        console.log(`rerun of ${taskIdOrLabel} accepted${opts.resetDependents ? ' (its resolved dependents follow)' : ''}`);
        if (opts.wait) {
          // the graph leaves `blocked` once the workflow has handled the rerun
          for (let i = 0; i < 50 && (await c.graphStatus(taskGraphId)).state === 'blocked'; i++) await new Promise((r) => setTimeout(r, 100));
          await waitAndReport(c, taskGraphId, waitOptions(opts));
        }
      });
    });

  addWaitOptions(graph.command('resume <taskGraphId>'))
    .description('start the workflow of a terminated graph again (its workflow closed before it ended); completed tasks do not run again')
    .option('--wait', `then ${WAIT_HELP}`)
    .action(async (taskGraphId: string, opts: WaitFlags & { wait?: boolean }) => {
      const resolved = requireCredentials();
      await withIds(resolved, { taskGraphId }, async (c) => {
        const status = await c.resume(taskGraphId);
        console.log(`task-graph ${taskGraphId} resumed: it is ${status.state}`);
        if (opts.wait) await waitAndReport(c, taskGraphId, waitOptions(opts));
      });
    });

  graph
    .command('cancel <taskGraphId>')
    .description('cancel every unresolved task of the graph')
    .action(async (taskGraphId: string) => {
      const resolved = requireCredentials();
      const status = await withIds(resolved, { taskGraphId }, (c) => c.cancel(taskGraphId));
      console.log(`task-graph ${taskGraphId} is ${status.state}`);
    });
}
