// What a run's log says about how its command ended. The shell worker writes one line when the command is over
// (src/shellWorker/runTask.ts: `[tgs-shell-worker <time>] exit code 3 after 1.2 s`, `killed by SIGKILL after …`,
// `could not start "x": … after …`); the queue keeps no exit code of its own, so the log is where the run recorded it.
// Pure (imported by node's unit tests: no DOM).

/** The last such line's outcome (`exit 3`, `killed by SIGKILL`, `could not start`), or undefined when the log has none. */
export function runOutcome(log: string): string | undefined {
  const re = /^\[tgs-shell-worker [^\]\n]*\] (?:exit code (-?\d+)|killed by ([A-Z0-9]+)|(could not start)\b[^\n]*) after [^\n]*$/gm;
  let last: RegExpExecArray | undefined;
  for (let m = re.exec(log); m; m = re.exec(log)) last = m;
  if (!last) return undefined;
  if (last[1] !== undefined) return `exit ${last[1]}`;
  if (last[2] !== undefined) return `killed by ${last[2]}`;
  return 'could not start';
}

