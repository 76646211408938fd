/** A part of a process that `stopInOrder` stops: its name as people read it, and how to stop it. */
export interface StoppablePart {
  name: string;
  run: () => Promise<void>;
}

/**
 * Stops the parts one after the other, last started first. A part that takes its time (tgs dev's scheduler worker
 * drains its activities: 19.5 s in a review, silent until this) is named every `everyMs` while it stops; a part that
 * fails to stop is named with its error and the others are still stopped.
 */
export async function stopInOrder(parts: StoppablePart[], say: { progress(line: string): void; error(line: string): void }, everyMs: number): Promise<void> {
  for (const { name, run } of [...parts].reverse()) {
    const started = Date.now();
    const progress = setInterval(() => say.progress(`stopping ${name} (${Math.round((Date.now() - started) / 1000)} s so far)`), everyMs);
    await run()
      .catch((err: unknown) => say.error(`stopping ${name}: ${(err as Error).message}`))
      .finally(() => clearInterval(progress));
  }
}
