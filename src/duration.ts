const UNIT_SECONDS: Record<string, number> = { s: 1, m: 60, h: 3600, d: 86400, w: 7 * 86400, mo: 30 * 86400, y: 365 * 86400 };

function unitSeconds(word: string): number | undefined {
  const w = word.toLowerCase();
  if (/^(s|secs?|seconds?)$/.test(w)) return UNIT_SECONDS.s;
  if (/^(m|mins?|minutes?)$/.test(w)) return UNIT_SECONDS.m;
  if (/^(h|hrs?|hours?)$/.test(w)) return UNIT_SECONDS.h;
  if (/^(d|days?)$/.test(w)) return UNIT_SECONDS.d;
  if (/^(w|weeks?)$/.test(w)) return UNIT_SECONDS.w;
  if (/^(mo|months?)$/.test(w)) return UNIT_SECONDS.mo;
  if (/^(y|years?)$/.test(w)) return UNIT_SECONDS.y;
  return undefined;
}

/** What is wrong with a duration: not one at all, or a word that is no unit. */
export class DurationError extends Error {
  constructor(readonly unknownUnit?: string) {
    super(unknownUnit === undefined ? 'not a duration' : `unknown unit ${JSON.stringify(unknownUnit)}`);
  }
}

/**
 * A duration as people and json-e's `$fromNow` write it, in milliseconds: `30d`, `12h`, `1 year`, `2 hours`,
 * `1 day 30 minutes`, `-15 min` (negative). Units: seconds, minutes, hours, days, weeks, months (30 days), years
 * (365 days), each also abbreviated (`s`, `m`/`min`, `h`/`hr`, `d`, `w`, `mo`, `y`). Throws a DurationError.
 */
export function parseDuration(text: string): number {
  const m = /^\s*(-)?\s*((?:\d+\s*[a-zA-Z]+\s*)+)$/.exec(text);
  if (!m) throw new DurationError();
  let seconds = 0;
  for (const [, n, unit] of m[2].matchAll(/(\d+)\s*([a-zA-Z]+)/g)) {
    const u = unitSeconds(unit);
    if (u === undefined) throw new DurationError(unit);
    seconds += Number(n) * u;
  }
  return (m[1] ? -1 : 1) * seconds * 1000;
}
