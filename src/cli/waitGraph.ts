// `--wait` (`tgs graph submit --wait`, `graph wait`, `graph rerun --wait`, `graph resume --wait`): progress until the
// graph ends, then the report that says why it did not finish and what to run next.
import { TgsApiError, type GraphInfo, type GraphTask, type TaskRun, type TgsClient } from '../client/tgsClient.js';
import { LIVE_LOG } from '../queue/liveLogName.js';
import { nextGraphCommand, printGraphExplanation } from './explanation.js';
import { countsLine, elapsed, Progress } from './progress.js';
import { exitNote } from './exitNote.js';

export interface WaitOptions {
  /** lines of a failed task's log to print */
  tailLines: number;
  /** stop at the first failure (the graph is blocked) instead of waiting until nothing else can run */
  failFast?: boolean;
  /** with tasks pending and none running, unchanged this long: print `graph why` once */
  whyAfterMs: number;
  /** how long the API may be unreachable (a restart) before the wait gives up */
  unreachableForMs: number;
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A failure of the request itself that a restarting API gives: no connection, or a proxy's 502/503/504. */
function unreachable(err: unknown): boolean {
  return err instanceof TgsApiError && (err.status === 0 || err.status === 502 || err.status === 503 || err.status === 504);
}

/** Whether nothing of a blocked graph can run any more: nothing runs or waits, and every unscheduled task waits on a task that did not complete. */
async function nothingCanRun(client: TgsClient, taskGraphId: string, info: GraphInfo): Promise<boolean> {
  if ((info.counts.running ?? 0) > 0 || (info.counts.pending ?? 0) > 0) return false;
  if ((info.counts.unscheduled ?? 0) === 0) return true;
  const tasks = await client.inspect(taskGraphId);
  const state = new Map(tasks.map((t) => [t.label, t.state]));
  // an unscheduled task whose requires all completed is about to be scheduled
  return tasks.every((t) => t.state !== 'unscheduled' || t.requires.some((r) => state.get(r) !== 'completed'));
}

/** `+2.1s`: when `iso` was, counted from the graph's creation. */
const since = (created: number, iso: string | undefined) => (iso ? `+${elapsed(Math.max(0, Date.parse(iso) - created))}` : '');

async function tail(client: TgsClient, taskId: string, run: TaskRun | undefined, lines: number): Promise<{ text: string; all: string } | undefined> {
  try {
    const log = (await client.artifact(taskId, LIVE_LOG, run ? { runId: run.runId } : {})).data.toString('utf8');
    const all = log.replace(/\n$/, '').split('\n');
    const kept = all.slice(-lines);
    return {
      all: log,
      text: `--- ${kept.length < all.length ? `last ${kept.length} of ${all.length} lines` : 'all lines'} of ${LIVE_LOG}${run ? ` (run ${run.runId})` : ''} ---\n${kept.join('\n')}\n---`,
    };
  } catch (e) {
    return { all: '', text: `(no ${LIVE_LOG}: ${(e as Error).message})` };
  }
}

/** Prints why the graph did not finish: every failed task (when, why), the first ones' log tails, and what to run next. */
async function reportNotFinished(client: TgsClient, info: GraphInfo, blocking: GraphTask[], options: WaitOptions, created: number): Promise<void> {
  const taskGraphId = info.status.taskGraphId;
  const state = info.status.state;
  const reason = info.stateReason ? ` (${info.stateReason})` : '';
  if (state === 'canceled') {
    console.log(`task-graph ${taskGraphId} was canceled${reason} (${countsLine(info)})`);
    return;
  }
  if (state === 'terminated') {
    console.log(`task-graph ${taskGraphId} is terminated${reason} (${countsLine(info)})`);
    console.log(`Resume it: tgs graph resume ${taskGraphId}`);
    return;
  }
  const running = (info.counts.running ?? 0) + (info.counts.pending ?? 0);
  console.log(`task-graph ${taskGraphId} is blocked (${countsLine(info)})${running ? `; ${running} task(s) still running or pending (--fail-fast stops at the first failure)` : '; nothing else can run'}`);
  const runs = await Promise.all(blocking.map((t) => client.taskStatus(t.taskId).then((s) => s.runs.at(-1), () => undefined)));
  const width = Math.max(...blocking.map((t) => t.label.length));
  console.log(`${blocking.length} failed task(s)${info.blockedBy.length > blocking.length ? ` (the first ${blocking.length} of ${info.blockedBy.length})` : ''}, times since the graph was created:`);
  blocking.forEach((t, i) => {
    const run = runs[i];
    const why = run?.reasonResolved && run.reasonResolved !== run.state ? ` (${run.reasonResolved})` : '';
    console.log(`  ${t.label.padEnd(width)}  ${t.taskId}  ${run ? `run ${run.runId} ${run.state}${why}` : t.state}  ${since(created, run?.resolved)}`);
  });
  let malformed = false;
  for (const [i, task] of blocking.slice(0, 3).entries()) {
    const run = runs[i];
    const how = run ? `run ${run.runId} ${run.state}${run.reasonResolved && run.reasonResolved !== run.state ? ` (${run.reasonResolved})` : ''}` : task.state;
    const log = await tail(client, task.taskId, run, options.tailLines);
    const exit = log && exitNote(log.all);
    console.log('');
    console.log(`blocking task: ${task.label} (${task.taskId}), ${how}${exit ? `, ${exit}` : ''}${task.reruns > 0 ? `, ${task.reruns} rerun(s) used up` : ''}`);
    if (log) console.log(log.text);
    if (i === 0) malformed = run?.reasonResolved === 'malformed-payload';
  }
  if (blocking.length > 3) console.log(`\n… and ${blocking.length - 3} more failed task(s): tgs graph logs ${taskGraphId}`);
  const first = blocking[0];
  if (first) {
    console.log('');
    console.log(`Full log: tgs task log ${taskGraphId} ${first.label}`);
    // a payload the worker cannot run fails the same way every time: only a changed definition helps
    if (malformed) console.log(`Its payload is malformed (the log says why): fix the task in the graph file, check it with tgs graph submit --check <file>, and submit again`);
    else console.log(`Rerun it: tgs graph rerun ${taskGraphId} ${first.label}`);
  }
}

/**
 * Waits with live progress, then reports. Exit code 0 when the graph finished; 1 when it is blocked (by default once
 * nothing else can run, with `failFast` at the first failure), canceled or terminated. A restarting API is waited for
 * (`unreachableForMs`), saying so on one line.
 */
export async function waitAndReport(client: TgsClient, taskGraphId: string, options: WaitOptions): Promise<void> {
  let progress: Progress | undefined;
  let created = Date.now();
  let unreachableSince: number | undefined;
  let lastKey = '';
  let lastChange = Date.now();
  let whyShown = false;
  let interval = 100;
  for (;;) {
    let info: GraphInfo;
    try {
      info = await client.graphInfo(taskGraphId);
      if (!progress) {
        created = Date.parse(info.created);
        progress = new Progress(client, taskGraphId, process.stdout, created);
      }
      await progress.update(info);
    } catch (err) {
      if (!unreachable(err)) throw err;
      const now = Date.now();
      if (unreachableSince === undefined) {
        unreachableSince = now;
        process.stderr.write(`tgs: ${(err as Error).message}\ntgs: --wait tries again for up to ${elapsed(options.unreachableForMs)} (a restarting API; Ctrl-C stops)\n`);
      } else if (now - unreachableSince > options.unreachableForMs) throw err;
      await sleep(1000);
      continue;
    }
    if (unreachableSince !== undefined) {
      process.stderr.write(`tgs: ${client.rootUrl} answers again after ${elapsed(Date.now() - unreachableSince)}\n`);
      unreachableSince = undefined;
    }
    const state = info.status.state;
    if (state === 'finished') {
      console.log(`task-graph ${taskGraphId} finished: ${info.counts.completed ?? 0} of ${info.taskCount} tasks completed in ${elapsed(Date.now() - created)} (since it was created)`);
      return;
    }
    const ended = state === 'canceled' || state === 'terminated';
    if (ended || (state === 'blocked' && (options.failFast || (await nothingCanRun(client, taskGraphId, info))))) {
      const blocking = await client.blockingTasks(taskGraphId, info);
      await reportNotFinished(client, info, blocking, options, created);
      const names = blocking.map((t) => `${t.label} (${t.taskId}, ${t.state})`).join(', ');
      console.error(
        state === 'blocked'
          ? `tgs: task-graph ${taskGraphId} is blocked by ${names || 'a failed task'}`
          : state === 'terminated'
            ? `tgs: task-graph ${taskGraphId} is terminated; resume it with tgs graph resume ${taskGraphId}`
            : `tgs: task-graph ${taskGraphId} was canceled`,
      );
      process.exitCode = 1;
      return;
    }
    const key = JSON.stringify(info.counts);
    if (key !== lastKey) {
      lastKey = key;
      lastChange = Date.now();
    } else if (!whyShown && (info.counts.pending ?? 0) > 0 && (info.counts.running ?? 0) === 0 && Date.now() - lastChange >= options.whyAfterMs) {
      // tasks wait and nothing moves: say why once (a mistyped workerType waits for ever in silence otherwise)
      whyShown = true;
      console.log(`nothing has started for ${elapsed(Date.now() - lastChange)}; tgs graph why ${taskGraphId} says:`);
      const explanation = await client.explainGraph(taskGraphId, 5);
      printGraphExplanation(explanation);
      const next = await nextGraphCommand(client, explanation);
      if (next) console.log(`Run next: ${next}`);
    }
    await sleep(interval);
    interval = Math.min(1000, Math.round(interval * 1.5));
  }
}
