// "did you mean": the closest of the known names to a mistyped one.

/** Optimal string alignment distance: edits, with a swap of two neighbours as one edit (`biuld` → `build`: 1). */
function distance(a: string, b: string): number {
  const d: number[][] = Array.from({ length: a.length + 1 }, (_, i) => [i, ...Array<number>(b.length).fill(0)]);
  for (let j = 1; j <= b.length; j++) d[0][j] = j;
  for (let i = 1; i <= a.length; i++) {
    for (let j = 1; j <= b.length; j++) {
      const cost = a[i - 1] === b[j - 1] ? 0 : 1;
      d[i][j] = Math.min(d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost);
      if (i > 1 && j > 1 && a[i - 1] === b[j - 2] && a[i - 2] === b[j - 1]) d[i][j] = Math.min(d[i][j], d[i - 2][j - 2] + 1);
    }
  }
  return d[a.length][b.length];
}

/**
 * The known name closest to `typed`, when it is close enough to be the one meant: at most a third of its
 * characters edited (at least one), case ignored. Names longer than 200 characters are not compared.
 */
export function closest(typed: string, known: Iterable<string>): string | undefined {
  if (typed.length > 200) return undefined;
  const limit = Math.max(1, Math.floor(typed.length / 3));
  let best: string | undefined;
  let bestDistance = limit + 1;
  for (const name of known) {
    if (name.length > 200 || Math.abs(name.length - typed.length) > limit) continue;
    const dist = distance(typed.toLowerCase(), name.toLowerCase());
    if (dist < bestDistance) {
      best = name;
      bestDistance = dist;
    }
  }
  return best;
}

/** ` (did you mean "build"?)`, or '' when nothing is close. */
export function didYouMean(typed: string, known: Iterable<string>): string {
  const match = closest(typed, known);
  return match === undefined ? '' : ` (did you mean ${JSON.stringify(match)}?)`;
}
