import { test } from 'node:test';
import assert from 'node:assert/strict';
import { DurationError, parseDuration } from '../src/duration.js';
import { parseExpires } from '../src/cli/commands/client.js';

test('durations: abbreviated and spelled-out units, several terms, a sign', () => {
  assert.equal(parseDuration('30d'), 30 * 86_400_000);
  assert.equal(parseDuration('12h'), 12 * 3_600_000);
  assert.equal(parseDuration('1 year'), 365 * 86_400_000);
  assert.equal(parseDuration('2 weeks'), 14 * 86_400_000);
  assert.equal(parseDuration('1 mo'), 30 * 86_400_000);
  assert.equal(parseDuration('1 day 30 minutes'), 86_400_000 + 30 * 60_000);
  assert.equal(parseDuration('90s'), 90_000);
  assert.equal(parseDuration('-15 min'), -15 * 60_000);
  assert.throws(() => parseDuration('soon'), (err: unknown) => err instanceof DurationError && err.unknownUnit === undefined);
  assert.throws(() => parseDuration('3 fortnights'), (err: unknown) => err instanceof DurationError && err.unknownUnit === 'fortnights');
});

test('--expires: a duration from now or a date; neither is refused', () => {
  const now = Date.parse('2030-01-01T00:00:00Z');
  assert.equal(parseExpires('30d', now), '2030-01-31T00:00:00.000Z');
  assert.equal(parseExpires('1 year', now), '2031-01-01T00:00:00.000Z');
  assert.equal(parseExpires('2027-01-01T00:00:00Z', now), '2027-01-01T00:00:00.000Z');
  assert.throws(() => parseExpires('soonish', now), /--expires "soonish": give a date/);
  assert.throws(() => parseExpires('-5d', now), /--expires "-5d": give a date/);
});
