import { TgsError } from '../errors.js';

/**
 * The shortest time between two fires of a hook's schedule, bounded from below without a cron engine: a schedule
 * time's second of the day is one of the (second × minute × hour) fields' values, and the day fields only ever
 * remove days, so the smallest gap between two of those seconds of the day (of every pattern together, and from the
 * last of a day to the first of the next) is never more than the schedule's real shortest gap. Each fire is a
 * Temporal workflow, a task and a last-fire row: `* * * * * *` with `@every 1s` gave 16 fires in 20 s (security
 * review 2026-11-28, finding 10), so a schedule firing more often than TGS_HOOK_MIN_INTERVAL_S is refused.
 */

const DAY_S = 86_400;
const SHORTHAND_S: Record<string, number> = { '@yearly': 365 * DAY_S, '@annually': 365 * DAY_S, '@monthly': 28 * DAY_S, '@weekly': 7 * DAY_S, '@daily': DAY_S, '@hourly': 3600 };
const UNIT_S: Record<string, number> = { s: 1, m: 60, h: 3600, d: DAY_S };

/** The values a cron field (`*`, `?`, `a`, `a-b`, `*\/n`, `a/n`, `a-b/n`, lists) takes within [0, max]. */
function fieldValues(field: string, max: number): number[] {
  const out = new Set<number>();
  for (const part of field.split(',')) {
    const [range, stepText] = part.split('/');
    const step = stepText === undefined ? 1 : Number(stepText);
    let from: number;
    let to: number;
    if (range === '*' || range === '?') [from, to] = [0, max];
    else if (range.includes('-')) [from, to] = range.split('-').map(Number) as [number, number];
    else [from, to] = [Number(range), stepText === undefined ? Number(range) : max];
    // a value this cannot read (a name): counted as every value, the conservative answer
    if (![from, to, step].every(Number.isInteger) || step < 1) [from, to] = [0, max];
    for (let v = Math.max(0, from); v <= Math.min(max, to); v += Number.isInteger(step) && step >= 1 ? step : 1) out.add(v);
  }
  return [...out];
}

/** The seconds of the day at which a 5- or 6-field pattern may fire. */
function secondsOfDay(pattern: string): number[] {
  const fields = pattern.trim().split(/\s+/);
  const [second, minute, hour] = fields.length === 6 ? fields : ['0', ...fields];
  const out: number[] = [];
  for (const h of fieldValues(hour, 23)) for (const m of fieldValues(minute, 59)) for (const s of fieldValues(second, 59)) out.push(h * 3600 + m * 60 + s);
  return out;
}

/** A lower bound of the shortest gap between two fires of the patterns together, in seconds. */
export function shortestGapS(patterns: string[]): number {
  let gap = Infinity;
  const seconds = new Set<number>();
  for (const raw of patterns) {
    const pattern = raw.trim();
    const every = /^@every ([0-9]+)([smhd])/.exec(pattern);
    if (every) gap = Math.min(gap, Number(every[1]) * UNIT_S[every[2]]);
    else if (pattern in SHORTHAND_S) {
      gap = Math.min(gap, SHORTHAND_S[pattern]);
      seconds.add(0);
    } else for (const s of secondsOfDay(pattern)) seconds.add(s);
  }
  const sorted = [...seconds].sort((a, b) => a - b);
  for (let i = 1; i < sorted.length; i++) gap = Math.min(gap, sorted[i] - sorted[i - 1]);
  if (sorted.length > 0) gap = Math.min(gap, sorted[0] + DAY_S - sorted[sorted.length - 1]);
  return gap;
}

/** Refuses (400) a schedule that may fire more often than once every `minIntervalS` seconds. */
export function checkScheduleInterval(patterns: string[], minIntervalS: number): void {
  if (patterns.length === 0 || minIntervalS <= 0) return;
  const gap = shortestGapS(patterns);
  if (gap < minIntervalS) {
    throw new TgsError(
      'InputError',
      `The schedule ${JSON.stringify(patterns)} may fire ${gap} s apart; a hook fires at most once every ${minIntervalS} s (TGS_HOOK_MIN_INTERVAL_S): ` +
        `use fewer times, e.g. one second value ("0 */5 * * * *" is every 5 minutes)`,
    );
  }
}
