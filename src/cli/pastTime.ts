// A moment in the past as options take it (`--since`, `--from`).
import { DurationError, parseDuration } from '../duration.js';

/** A date (`2026-11-20T00:00:00Z`) or a duration ago (`3d`, `12h`). */
export function pastTime(value: string, option: string): string {
  try {
    return new Date(Date.now() - parseDuration(value)).toISOString();
  } catch (err) {
    if (!(err instanceof DurationError)) throw err;
  }
  const date = new Date(value);
  if (!/^\d{4}-\d{2}-\d{2}/.test(value) || Number.isNaN(date.getTime())) throw new Error(`${option} ${JSON.stringify(value)}: give a date (2026-11-20T00:00:00Z) or a duration ago (3d, 12h)`);
  return date.toISOString();
}
