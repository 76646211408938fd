import type { Blocker, TaskExplanation } from '../queue/explainTask.js';
import type { GraphExplanation, RootCause } from '../scheduler/explainGraph.js';
import type { TgsClient } from '../client/tgsClient.js';
import { readLog } from './liveLog.js';
import { exitNote } from './exitNote.js';

/** One blocker as a line: what it is, what it names, and what clears it. */
function blockerLine(b: Blocker): string {
  const names = b.dependencies?.map((d) => `${d.label ?? d.taskId} (${d.state})`).join(', ');
  const detail = [
    names,
    b.taskQueueId,
    b.position ? `${b.position.ahead} ahead (${b.position.aheadAtHigherPriority} at higher priority)` : undefined,
    b.claimsPerMinute != null ? `${b.claimsPerMinute} claims/min` : undefined,
    b.etaSeconds != null ? `ETA ${b.etaSeconds} s` : undefined,
    b.lastClaimWork !== undefined ? (b.lastClaimWork ? `last claimWork ${b.lastClaimWork}` : 'never claimed from') : undefined,
    b.deadline ? `deadline ${b.deadline}` : undefined,
    b.blockedBy?.length ? `blocked by ${b.blockedBy.join(', ')}` : undefined,
  ].filter(Boolean);
  return `  ${b.kind}${detail.length ? `: ${detail.join('; ')}` : ''}\n    → ${b.action}`;
}

/** `tgs task why`: the summary, then each blocker with its action. */
export function printTaskExplanation(e: TaskExplanation): void {
  console.log(`${e.taskId}: ${e.summary}`);
  for (const b of e.blockers) console.log(blockerLine(b));
}

function causeLine(c: RootCause): string {
  const what = c.label ?? c.taskId ?? c.taskQueueId;
  return `  ${String(c.count).padStart(6)}  ${c.kind}${what ? ` ${what}` : ''}\n          → ${c.action}`;
}

/** `tgs graph why`: the summary, then the root causes, most explaining first. */
export function printGraphExplanation(e: GraphExplanation): void {
  console.log(`${e.taskGraphId} ${e.state}: ${e.summary}`);
  for (const c of e.rootCauses) console.log(causeLine(c));
  if (e.omittedRootCauses > 0) console.log(`  (${e.omittedRootCauses} more root causes, each explaining fewer tasks: --limit)`);
  if (e.workflow === 'unavailable') console.log('  (the graph\'s workflow did not answer: explained from the queue\'s rows alone)');
  if (e.lastAmend) {
    const a = e.lastAmend;
    console.log(`Amend #${a.amend} by ${a.who} at ${a.created}:`);
    for (const n of a.nodes) console.log(`  ${n.label.padEnd(24)} ${n.amended.padEnd(9)} ${n.cutoff ?? ''}`.trimEnd());
    if (a.omittedNodes > 0) console.log(`  (${a.omittedNodes} more amended tasks: --limit, or tgs graph inspect)`);
  }
}

/** The command that acts on the graph's first root cause, or undefined when none would help. */
export async function nextGraphCommand(client: TgsClient, e: GraphExplanation): Promise<string | undefined> {
  const id = e.taskGraphId;
  let first = e.rootCauses[0];
  if (!first && e.state === 'blocked') {
    // nothing left to wait for: the failed tasks are all there is
    const blocking = (await client.blockingTasks(id))[0];
    if (blocking) first = { kind: 'dependency-failed', taskId: blocking.taskId, label: blocking.label, count: 0, action: '' };
  }
  if (!first) return undefined;
  switch (first.kind) {
    case 'dependency-failed': {
      if (!first.taskId) return undefined;
      const run = (await client.taskStatus(first.taskId).catch(() => undefined))?.runs.at(-1);
      // a payload the worker cannot run fails the same way again
      if (run?.reasonResolved === 'malformed-payload') return `tgs task log ${first.taskId}   # malformed payload: fix the graph file (tgs graph submit --check <file>) and submit it again`;
      return `tgs graph rerun ${id} ${first.label ?? first.taskId}`;
    }
    case 'no-workers':
    case 'quarantined': {
      const [provisionerId, workerType] = (first.taskQueueId ?? '/').split('/');
      return `tgs shell-worker --provisioner-id ${provisionerId} --worker-type ${workerType} --capacity 2   # or fix the task's pool (tgs dev serves tgs-dev/shell)`;
    }
    case 'graph-terminated':
      return `tgs graph resume ${id}`;
    case 'inconsistent':
      return `tgs graph why ${id}   # again in a few seconds: this call asked the workflow to reconcile`;
    case 'graph-canceled':
      return undefined;
    default:
      return `tgs graph wait ${id}`;
  }
}

/** For a failed or exception task, its last run: how it ended (the exit code the shell worker noted) and the commands that follow. */
export async function failedTaskDetail(client: TgsClient, e: TaskExplanation): Promise<string[]> {
  const status = await client.taskStatus(e.taskId);
  if (status.state !== 'failed' && status.state !== 'exception') return [];
  const run = status.runs.at(-1);
  if (!run) return [];
  const log = await readLog(client, e.taskId, run.runId).catch(() => undefined);
  const exit = log ? exitNote(log.toString('utf8')) : undefined;
  const label = await client.inspect(status.taskGroupId, e.taskId).then((t) => t.label, () => undefined);
  const lines = [`  run ${run.runId} ${run.state}${run.reasonResolved && run.reasonResolved !== run.state ? ` (${run.reasonResolved})` : ''}${exit ? `: ${exit}` : ''}`];
  lines.push(`    → its log: tgs task log ${e.taskId}`);
  if (run.reasonResolved === 'malformed-payload') lines.push('    → fix its payload in the graph file (the log says what is wrong; tgs graph submit --check <file>), then submit again');
  else lines.push(`    → rerun it: ${label ? `tgs graph rerun ${status.taskGroupId} ${label}` : `tgs task rerun ${e.taskId}`}`);
  return lines;
}
