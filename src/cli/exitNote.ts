// How a shell worker's run ended, from the line the worker adds at the end of its log (src/shellWorker/runTask.ts).

/** The exit code or signal the shell worker noted at the end of a run's log (`exit code 3`, `killed by SIGTERM`). */
export function exitNote(log: string): string | undefined {
  const notes = [...log.matchAll(/^\[tgs-shell-worker [^\]]*\] (exit code -?\d+|killed by \w+|maxRunTime of \d+ s exceeded)/gm)];
  return notes.at(-1)?.[1];
}
