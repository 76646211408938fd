import type { Blocker, TaskExplanation } from '../queue/explainTask.js';
import type { GraphExplanation, RootCause } from '../scheduler/explainGraph.js';

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
}
