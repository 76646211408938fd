import assert from 'node:assert/strict';
import fc from 'fast-check';
import { errorStatus } from '../../src/errors.js';

/**
 * fast-check settings for the fuzz tests. Every run uses a fresh seed; a failure prints it with the
 * shrunk counterexample and its `path`. Replay one with TGS_TEST_FUZZ_SEED (and TGS_TEST_FUZZ_PATH).
 */
export function fuzzParameters(numRuns: number): fc.Parameters<unknown> {
  const seed = process.env.TGS_TEST_FUZZ_SEED;
  const path = process.env.TGS_TEST_FUZZ_PATH;
  return {
    numRuns,
    ...(seed ? { seed: Number(seed) } : {}),
    ...(path ? { path } : {}),
    reporter: reportFailure,
  };
}

/**
 * fast-check's own report prints the counterexample with a recursive printer, which overflows the stack on
 * the 2,000-level bodies the fuzzers send: the failure would read "Maximum call stack size exceeded" instead
 * of what failed. This one keeps the cause and prints what it can.
 */
function reportFailure(details: fc.RunDetails<unknown>): void {
  if (!details.failed) return;
  let shown: string;
  try {
    shown = fc.stringify(details.counterexample);
  } catch {
    shown = '(too deeply nested to print: rerun with the seed and path)';
  }
  const where = `{ seed: ${details.seed}, path: "${details.counterexamplePath}" } (TGS_TEST_FUZZ_SEED, TGS_TEST_FUZZ_PATH)`;
  const cause = details.errorInstance instanceof Error ? details.errorInstance.message : String(details.errorInstance ?? 'no error');
  throw new Error(`Property failed after ${details.numRuns} tests\n${where}\nCounterexample: ${shown.slice(0, 4000)}\n${cause.slice(0, 4000)}`, {
    cause: details.errorInstance,
  });
}

/** Strings a hostile client sends: unicode, NUL, lone surrogates, escapes, markup (short enough for a URL). */
export const hostileText: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: fc.string(), weight: 3 },
  { arbitrary: fc.string({ unit: 'binary' }), weight: 3 },
  { arbitrary: fc.string({ unit: 'grapheme' }), weight: 2 },
  {
    arbitrary: fc.constantFrom(
      '', '\u0000', 'a\u0000b', '\ud800', 'x\udfff', '\ud83d', '\u202e\u2066', '\ufeff', '\u2028\u2029', '%', '%zz', '%00', '%2F',
      '../../etc/passwd', '<script>alert(1)</script>', '${{x}}', "'; DROP TABLE tasks; --", '\\', '"', '*', 'queue:*', '**',
    ),
    weight: 3,
  },
);

/** hostileText, and sometimes a huge string. */
export const hostileString: fc.Arbitrary<string> = fc.oneof(
  { arbitrary: hostileText, weight: 10 },
  { arbitrary: fc.integer({ min: 256, max: 100_000 }).map((n) => 'x'.repeat(n)), weight: 1 },
);

/** Keys that mean something to JavaScript or to tgs. */
export const hostileKey: fc.Arbitrary<string> = fc.oneof(
  fc.constantFrom('__proto__', 'constructor', 'prototype', 'toString', 'hasOwnProperty', 'valueOf', '$subs', '', ' ', 'polluted'),
  fc.string({ maxLength: 20 }),
  fc.string({ unit: 'binary', maxLength: 10 }),
);

/**
 * `{"a": {"a": …}}` or `[[…]]`, built without recursion. Up to 3,000 levels: past the server's limits
 * (structuredClone overflowed at 2,000) but within what JSON.stringify can send (it overflows near 5,000).
 */
export function nested(depth: number, kind: 'object' | 'array'): unknown {
  let value: unknown = 'bottom';
  for (let i = 0; i < depth; i++) value = kind === 'object' ? { a: value } : [value];
  return value;
}

export const deepValue: fc.Arbitrary<unknown> = fc
  .tuple(fc.oneof(fc.integer({ min: 20, max: 200 }), fc.integer({ min: 200, max: 3_000 })), fc.constantFrom<'object' | 'array'>('object', 'array'))
  .map(([depth, kind]) => nested(depth, kind));

/** An object whose own keys may be `__proto__` and friends (JSON.stringify sends them like any other key). */
export const hostileObject = (value: fc.Arbitrary<unknown>): fc.Arbitrary<Record<string, unknown>> =>
  fc.array(fc.tuple(hostileKey, value), { maxLength: 5 }).map((entries) => Object.fromEntries(entries));

/** Any JSON value a hostile client might put where a specific type is expected. */
export const hostileValue: fc.Arbitrary<unknown> = fc.oneof(
  { arbitrary: fc.jsonValue({ maxDepth: 3 }), weight: 4 },
  { arbitrary: hostileString, weight: 4 },
  { arbitrary: fc.oneof(fc.integer(), fc.double({ noNaN: true, noDefaultInfinity: true }), fc.constantFrom(0, -1, 1.5, 2 ** 53 + 1, 1e308, 5e-324)), weight: 2 },
  { arbitrary: fc.constantFrom(null, true, false, [], {}), weight: 1 },
  { arbitrary: deepValue, weight: 1 },
  { arbitrary: hostileObject(fc.jsonValue({ maxDepth: 2 })), weight: 2 },
);

/** Dates as clients write them: other offsets, lower case, leap seconds, no zone, numbers, far years. */
export function oddDate(now: number): fc.Arbitrary<unknown> {
  const iso = (ms: number) => new Date(ms).toISOString();
  const day = iso(now).slice(0, 10);
  return fc.oneof(
    fc.integer({ min: -20 * 60_000, max: 6 * 24 * 3600_000 }).chain((offset) => {
      const at = iso(now + offset);
      const plus14 = new Date(now + offset + 14 * 3600_000).toISOString().replace('Z', '+14:00');
      return fc.constantFrom(at, at.toLowerCase(), at.replace('T', ' '), at.replace('Z', ''), at.replace(/\.\d+Z$/, '.123456789Z'), plus14, at.slice(0, 10), now + offset);
    }),
    fc.constantFrom(
      `${day}T23:59:60Z`, `${day}T23:59:60.999Z`, `${day}T24:00:00Z`, '2026-02-30T00:00:00Z', '0000-01-01T00:00:00Z',
      '+275760-09-13T00:00:00.000Z', '9999-12-31T23:59:59Z', '1970-01-01T00:00:00Z', 'now', '', 'Infinity',
    ),
    fc.date({ noInvalidDate: true }).map((d) => d.toISOString()),
  );
}

type Reply = { status: number; body: any };

/** A refusal in Taskcluster's shape: a 4xx whose `code` is a known error with that status, and a message. */
export function assertRefusal(res: Reply, what: string): void {
  assert.ok(res.status >= 400 && res.status < 500, `${what}: expected a 4xx, got ${res.status} ${JSON.stringify(res.body)?.slice(0, 2000)}`);
  assert.equal(typeof res.body, 'object', `${what}: a JSON error body`);
  assert.equal(typeof res.body.code, 'string', `${what}: error code`);
  assert.equal(errorStatus[res.body.code as keyof typeof errorStatus], res.status, `${what}: ${res.body.code} is Taskcluster's code for ${res.status}`);
  assert.equal(typeof res.body.message, 'string', `${what}: error message`);
  assert.ok(res.body.message.length > 0, `${what}: error message`);
}

/** Never a 5xx; a refusal is Taskcluster's shape. */
export function assertAnswered(res: Reply, what: string): void {
  assert.ok(res.status < 500, `${what}: ${res.status} ${JSON.stringify(res.body)?.slice(0, 2000)}`);
  if (res.status >= 400) assertRefusal(res, what);
}

/** Fails when anything was added to Object.prototype (a request that polluted it would show here). */
export function assertNoPrototypePollution(what: string): void {
  assert.deepEqual(Object.getOwnPropertyNames(Object.prototype).sort(), PROTOTYPE_KEYS, `${what}: Object.prototype changed`);
  assert.equal(({} as Record<string, unknown>).polluted, undefined, `${what}: Object.prototype polluted`);
}
const PROTOTYPE_KEYS = Object.getOwnPropertyNames(Object.prototype).sort();
