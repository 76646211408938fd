import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { boundedJson, echoedPayload, MAX_ECHOED_PAYLOAD_CHARS } from '../../src/api/errorReply.js';
import { nested } from '../helpers/fuzz.js';

test('boundedJson writes what JSON.stringify writes, or its prefix cut at the bound', () => {
  fc.assert(
    fc.property(fc.jsonValue(), fc.integer({ min: 1, max: 400 }), (value, max) => {
      const whole = JSON.stringify(value);
      const { text, complete } = boundedJson(value, max);
      assert.equal(complete, whole.length <= max);
      assert.equal(text, complete ? whole : whole.slice(0, max));
    }),
  );
});

test('the echo of a body nested 1,000,000 levels deep is a short prefix, not a stack overflow', () => {
  for (const kind of ['array', 'object'] as const) {
    const echoed = echoedPayload(nested(1_000_000, kind));
    assert.equal(typeof echoed, 'string');
    assert.ok((echoed as string).length < MAX_ECHOED_PAYLOAD_CHARS + 50);
    assert.ok((echoed as string).startsWith(kind === 'array' ? '[[[[' : '{"a":{"a":'));
  }
  const small = { a: [1, 'two', null] };
  assert.equal(echoedPayload(small), small, 'a short body is echoed as it is');
});
