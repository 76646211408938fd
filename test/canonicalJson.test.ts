import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import { graphHash } from '../src/canonicalJson.js';

/** The canonical form as it was first built (one string): stored graph_hash values were made from it. */
function canonicalString(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonicalString).join(',')}]`;
  if (value && typeof value === 'object') {
    return `{${Object.keys(value)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonicalString((value as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value);
}
const reference = (value: unknown) => createHash('sha256').update(canonicalString(value)).digest('hex');

test('graphHash hashes exactly the canonical string the stored hashes were made from', () => {
  const samples: unknown[] = [
    {},
    [],
    { b: 1, a: [1, 'two', null, true, { z: 'ü ✓ \u0000 "q"', y: [] }], c: { n: -0.5e-7 } },
    { tasks: Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`t${i}`, { requires: [`t${i - 1}`], task: { payload: { cmd: 'x'.repeat(i % 50) } } }])) },
    { withUndefined: undefined, list: [1, undefined, 2] },
  ];
  for (const sample of samples) assert.equal(graphHash(sample), reference(sample));
  assert.notEqual(graphHash({ a: 1, b: 2 }), graphHash({ a: 2, b: 1 }));
  assert.equal(graphHash({ a: 1, b: 2 }), graphHash({ b: 2, a: 1 }), 'key order does not matter');
});
