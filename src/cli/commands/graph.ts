import type { Command } from 'commander';
import path from 'node:path';
import slugid from 'slugid';
import { requireCredentials, resolveCredentials } from '../../client/credentials.js';
import { GraphNotFinishedError, TgsClient, type AmendedGraph, type GraphInfo, type GraphTask, type TaskGraph, type TaskGraphNode } from '../../client/tgsClient.js';
import { LIVE_LOG } from '../../queue/liveLogName.js';
import { defaultOwner, readGraphFile, withTaskDefaults } from '../graphFile.js';
import { countsLine, elapsed, Progress } from '../progress.js';
import { printGraphExplanation } from '../explanation.js';
import { withClient } from '../withClient.js';

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
  if (a.workflow === 'started') console.log(`the graph had finished: it is ${a.state} again`);
  if (a.workflow === 'not-running') console.log(`the graph's workflow is not running: resume it with tgs graph resume ${a.taskGraphId}`);
  if (!a.dryRun) console.log(`it is ${a.state}`);
}

/** Prints why the graph did not finish: the blocking tasks, their run's reason and the tail of their log. */
async function reportNotFinished(client: TgsClient, err: GraphNotFinishedError, tailLines: number): Promise<void> {
  if (err.state === 'canceled') {
    console.log(`task-graph ${err.taskGraphId} was canceled${err.info.stateReason ? ` (${err.info.stateReason})` : ''} (${countsLine(err.info)})`);
    return;
  }
  if (err.state === 'terminated') {
    console.log(`task-graph ${err.taskGraphId} is terminated${err.info.stateReason ? ` (${err.info.stateReason})` : ''} (${countsLine(err.info)})`);
    console.log(`Resume it: tgs graph resume ${err.taskGraphId}`);
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

interface SubmitOptions {
  wait?: boolean;
  /** false with --no-cache */
  cache: boolean;
  refreshCache?: boolean;
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
      'submit a task-graph file (docs/formats.md, JSON or YAML) and print its id and page. Tasks may leave out created ' +
        '(now), deadline (now + 1 day) and metadata; {"$fromNow": "2 hours"} anywhere becomes a date',
    )
    .option('--wait', 'show progress until the graph finishes (exit 0), blocks or is canceled (exit 1)')
    .option('--id <taskGraphId>', 'the taskGraphId to use (a slugid; default: a new one)')
    .option('--no-cache', 'run every cached node, and write no cache entry (the graph\'s cacheMode off)')
    .option('--refresh-cache', 'run every cached node and overwrite its cache entry (cacheMode refresh)')
    .option('--json', 'print the API answer as JSON')
    .option(...tailOption)
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
    .command('why <taskGraphId>')
    .description('why the graph has not finished: the root causes of its unresolved tasks, most explaining first')
    .option('--json', 'print the API answer as JSON')
    .option('--limit <n>', 'root causes to show (at most 999)', '20')
    .action(async (taskGraphId: string, opts: { json?: boolean; limit: string }) => {
      const explanation = await withClient(resolveCredentials(), (c) => c.explainGraph(taskGraphId, Number(opts.limit)));
      if (opts.json) console.log(JSON.stringify(explanation, null, 2));
      else printGraphExplanation(explanation);
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
    .command('resume <taskGraphId>')
    .description('start the workflow of a terminated graph again (its workflow closed before it ended); completed tasks do not run again')
    .option('--wait', 'then show progress until the graph finishes (exit 0), blocks or is canceled (exit 1)')
    .option(...tailOption)
    .action(async (taskGraphId: string, opts: { wait?: boolean; tail: string }) => {
      const resolved = requireCredentials();
      await withClient(resolved, async (c) => {
        const status = await c.resume(taskGraphId);
        console.log(`task-graph ${taskGraphId} resumed: it is ${status.state}`);
        if (opts.wait) await waitAndReport(c, taskGraphId, Number(opts.tail));
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
