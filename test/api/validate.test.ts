import { test } from 'node:test';
import assert from 'node:assert/strict';
import { assertMatches, validateInput } from '../../src/api/validate.js';
import { TgsError } from '../../src/errors.js';

const schema = { type: 'object', properties: { n: { type: 'integer' }, tag: { type: 'string', default: 'x' } }, required: ['n'], additionalProperties: false };

test("what the service built itself is checked against its schema: a mismatch is the service's bug, not a client's 400", () => {
  const value: Record<string, unknown> = { n: 1 };
  assert.equal(assertMatches(schema, value, 'message'), value);
  assert.equal(value.tag, 'x');
  assert.throws(
    () => assertMatches(schema, { n: 'one' }, 'message'),
    (err: unknown) => err instanceof Error && !(err instanceof TgsError) && /message does not match its schema:\nmessage\.n must be integer/.test(err.message),
  );
  // input of a client with the same problem is a 400
  assert.throws(() => validateInput(schema, { n: 'one' }), (err: unknown) => err instanceof TgsError && err.code === 'InputValidationError');
});
