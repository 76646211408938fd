import type { Command } from 'commander';
import { writeFileSync } from 'node:fs';
import { requireCredentials, resolveCredentials } from '../../client/credentials.js';
import type { TaskRun, TaskStatus, TgsClient } from '../../client/tgsClient.js';
import { LIVE_LOG } from '../../queue/liveLogName.js';
import { isResolved } from '../../taskStates.js';
import { withIds } from '../ids.js';
import { readLog } from '../liveLog.js';
import { inspectOne } from '../graphTask.js';
import { failedTaskDetail, printTaskExplanation } from '../explanation.js';
import { byteSize } from '../../byteSize.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function runId(value: string | undefined): number | undefined {
  if (value === undefined) return undefined;
  if (!/^\d+$/.test(value)) throw new Error(`--run ${JSON.stringify(value)}: give a run number (0, 1, …)`);
  return Number(value);
}

function describeRun(r: TaskRun): string {
  const reason = r.reasonResolved && r.reasonResolved !== r.state ? ` (${r.reasonResolved})` : '';
  // a run reused from the cache names its source instead of a worker (docs/formats.md § Cached tasks)
  const where = r.cachedFrom
    ? ` from the cache: task ${r.cachedFrom.taskId} run ${r.cachedFrom.runId} (tier ${r.cachedFrom.tier})`
    : r.keptFrom
      ? ` kept by an amend's early cutoff: task ${r.keptFrom.taskId} run ${r.keptFrom.runId}`
      : r.workerId
      ? ` on ${r.workerGroup}/${r.workerId}`
      : '';
  const when = r.resolved ? `resolved ${r.resolved}` : r.started ? `started ${r.started}` : `scheduled ${r.scheduled}`;
  return `run ${r.runId}  ${r.state}${reason}${where}, ${when} [${r.reasonCreated}]`;
}

function printStatus(s: TaskStatus): void {
  console.log(`task         ${s.taskId}`);
  console.log(`state        ${s.state}`);
  console.log(`queue        ${s.taskQueueId} (priority ${s.priority}, ${s.retriesLeft} retries left)`);
  console.log(`task group   ${s.taskGroupId} (scheduler ${s.schedulerId})`);
  console.log(`deadline     ${s.deadline}`);
  for (const r of s.runs) console.log(`  ${describeRun(r)}`);
  if (s.runs.length === 0) console.log('  no runs yet');
}

/** The run to show: the one asked for, or the latest (undefined while the task has none). */
function pickRun(status: TaskStatus, wanted: number | undefined): TaskRun | undefined {
  if (wanted === undefined) return status.runs[status.runs.length - 1];
  const run = status.runs[wanted];
  if (!run) throw new Error(`task ${status.taskId} has no run ${wanted} (it has ${status.runs.length})`);
  return run;
}

/**
 * Prints a run's live log; with `follow`, keeps printing what is added (the worker re-uploads the whole log) until
 * the run resolves, then goes on to the task's next run if one starts (a retry).
 */
async function printLog(client: TgsClient, taskId: string, wanted: number | undefined, follow: boolean): Promise<void> {
  let status = await client.taskStatus(taskId);
  let run = pickRun(status, wanted);
  if (!follow) {
    if (!run) throw new Error(`task ${taskId} has no run yet (it is ${status.state}); follow it with: tgs task log -f ${taskId}`);
    const log = await readLog(client, taskId, run.runId);
    if (!log) throw new Error(`run ${run.runId} of ${taskId} has no ${LIVE_LOG} (yet): its worker uploads one while it runs`);
    process.stdout.write(log);
    return;
  }
  let printed = 0;
  for (;;) {
    if (run) {
      const resolvedBefore = isResolved(run.state);
      const log = await readLog(client, taskId, run.runId);
      if (log && log.length > printed) {
        process.stdout.write(log.subarray(printed));
        printed = log.length;
      }
      if (resolvedBefore) {
        // the final upload happens before the report, so this read has the whole log
        if (wanted !== undefined) return;
        status = await client.taskStatus(taskId);
        const next = status.runs[run.runId + 1];
        if (!next && (isResolved(status.state) || status.state === 'unscheduled')) return;
        if (next) {
          process.stderr.write(`tgs: run ${run.runId} ${run.state}${run.reasonResolved ? ` (${run.reasonResolved})` : ''}; following run ${next.runId}\n`);
          run = next;
          printed = 0;
          continue;
        }
      }
    }
    await sleep(1000);
    status = await client.taskStatus(taskId);
    // stay on the run being printed until it resolves (then the loop above moves on)
    run = run ? status.runs[run.runId] : pickRun(status, wanted);
  }
}

export function registerTaskCommand(program: Command): void {
  const task = program.command('task').description('look at and act on queue tasks; uses TGS_ROOT_URL, TGS_CLIENT_ID, TGS_ACCESS_TOKEN');

  task
    .command('status <taskId>')
    .description('state and runs of a task')
    .option('--json', 'print the API answer as JSON')
    .action(async (taskId: string, opts: { json?: boolean }) => {
      const status = await withIds(resolveCredentials(), { taskId }, (c) => c.taskStatus(taskId));
      if (opts.json) console.log(JSON.stringify(status, null, 2));
      else printStatus(status);
    });

  task
    .command('why <taskId>')
    .description('why the task is not running (yet): each blocker and the action that clears it')
    .option('--json', 'print the API answer as JSON')
    .action(async (taskId: string, opts: { json?: boolean }) => {
      await withIds(resolveCredentials(), { taskId }, async (c) => {
        const explanation = await c.explainTask(taskId);
        if (opts.json) {
          console.log(JSON.stringify(explanation, null, 2));
          return;
        }
        printTaskExplanation(explanation);
        for (const line of await failedTaskDetail(c, explanation)) console.log(line);
      });
    });

  task
    .command('log <taskIdOrTaskGraphId> [label]')
    .description(`print a task's ${LIVE_LOG} (latest run unless --run): by taskId, or by task-graph id and label`)
    .option('-f, --follow', 'keep printing as the log grows, until the run (and any retry) resolves')
    .option('--run <runId>', 'which run')
    .action(async (id: string, label: string | undefined, opts: { follow?: boolean; run?: string }) => {
      const ids = label === undefined ? { taskId: id } : { taskGraphId: id };
      await withIds(resolveCredentials(), ids, async (c) => {
        const taskId = label === undefined ? id : (await inspectOne(c, id, label)).taskId;
        await printLog(c, taskId, runId(opts.run), Boolean(opts.follow));
      });
    });

  task
    .command('artifacts <taskId>')
    .description('list the artifacts of a run (latest unless --run), or download one with --get')
    .option('--run <runId>', 'which run')
    .option('--get <name>', 'write this artifact to stdout (or to --output)')
    .option('-o, --output <file>', 'with --get: the file to write')
    .option('--json', 'print the list as JSON')
    .action(async (taskId: string, opts: { run?: string; get?: string; output?: string; json?: boolean }) => {
      const run = runId(opts.run);
      await withIds(resolveCredentials(), { taskId }, async (c) => {
        if (opts.get) {
          const { data } = await c.artifact(taskId, opts.get, { runId: run });
          if (opts.output) writeFileSync(opts.output, data);
          else process.stdout.write(data);
          return;
        }
        const artifacts = await c.listArtifacts(taskId, { runId: run });
        if (opts.json) {
          console.log(JSON.stringify(artifacts, null, 2));
          return;
        }
        if (artifacts.length === 0) {
          console.log(`no artifacts${run === undefined ? ' in the latest run' : ` in run ${run}`}`);
          return;
        }
        // where each is really stored and its size (a HEAD, never the bytes), 8 at a time
        const located: { where: string; size?: number }[] = [];
        for (let i = 0; i < artifacts.length; i += 8) {
          located.push(...(await Promise.all(artifacts.slice(i, i + 8).map((a) => c.whereArtifact(taskId, a, { runId: run }).catch((err: Error) => ({ where: `unknown (${err.message.split('\n')[0]})`, size: undefined }))))));
        }
        const width = Math.max('NAME'.length, ...artifacts.map((a) => a.name.length));
        const whereWidth = Math.max('STORED IN'.length, ...located.map((l) => l.where.length));
        console.log(`${'NAME'.padEnd(width)}  ${'STORED IN'.padEnd(whereWidth)}  ${'SIZE'.padStart(9)}  CONTENT TYPE                URL`);
        artifacts.forEach((a, i) => {
          const { where, size } = located[i];
          console.log(`${a.name.padEnd(width)}  ${where.padEnd(whereWidth)}  ${(size === undefined ? '-' : byteSize(size)).padStart(9)}  ${a.contentType.padEnd(26)}  ${c.artifactUrl(taskId, a.name, { runId: run })}`);
        });
      });
    });

  task
    .command('rerun <taskId>')
    .description('rerun a resolved task in the queue (for a task of a graph, `tgs graph rerun` also unblocks the graph)')
    .action(async (taskId: string) => {
      const status = await withIds(requireCredentials(), { taskId }, (c) => c.rerunTask(taskId));
      console.log(`task ${taskId} is ${status.state} (run ${status.runs.length - 1})`);
    });

  task
    .command('cancel <taskId>')
    .description('cancel an unresolved task')
    .action(async (taskId: string) => {
      const status = await withIds(requireCredentials(), { taskId }, (c) => c.cancelTask(taskId));
      console.log(`task ${taskId} is ${status.state}`);
    });
}
