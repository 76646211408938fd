import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { expressionSatisfied, renderExpression, unsatisfiablePart } from '../../src/auth/scopes.js';

// What the API refuses an anonymous caller before reading the body: the part of an endpoint's scopes that the
// `anonymous` role cannot satisfy whatever the parameters are.

const ANONYMOUS = ['assume:anonymous', 'queue:get-task:*', 'queue:status:*', 'queue:list-task-queues'];
const CREATE_TASK = {
  AllOf: [
    { for: 'scope', in: 'scopes', each: '<scope>' },
    'queue:scheduler-id:<schedulerId>',
    'queue:create-task:<priority>:<provisionerId>/<workerType>',
  ],
};

test('the part no parameters make satisfiable: templates only, never a `for ... in` (checkable unrendered)', () => {
  assert.deepEqual(unsatisfiablePart(ANONYMOUS, CREATE_TASK), {
    AllOf: ['queue:scheduler-id:<schedulerId>', 'queue:create-task:<priority>:<provisionerId>/<workerType>'],
  });
  assert.equal(unsatisfiablePart([], 'queue:get-task:<taskId>'), 'queue:get-task:<taskId>');
  assert.equal(unsatisfiablePart(ANONYMOUS, 'queue:get-task:<taskId>'), undefined, 'a star scope under the template');
  assert.equal(unsatisfiablePart(['queue:get-task:abc'], 'queue:get-task:<taskId>'), undefined, 'one rendering is the scope');
  assert.equal(unsatisfiablePart(['queue:*'], 'queue:get-task:<taskId>'), undefined, 'a star scope above the template');
  assert.equal(unsatisfiablePart(['queue:get-task:abc'], 'queue:status:<taskId>'), 'queue:status:<taskId>');
  assert.equal(unsatisfiablePart(ANONYMOUS, 'queue:list-task-queues'), undefined);
  assert.equal(unsatisfiablePart(ANONYMOUS, 'queue:list-provisioners'), 'queue:list-provisioners');
  assert.equal(unsatisfiablePart(['a.b'], 'a<x>b'), undefined, 'template text is not a pattern');
  assert.equal(unsatisfiablePart(['a.c'], 'a.<x>b'), 'a.<x>b');
  assert.equal(unsatisfiablePart([], { for: 'p', in: 'properties', each: 'x:<p>' }), undefined, 'an empty array needs nothing');
  assert.equal(unsatisfiablePart(ANONYMOUS, { AnyOf: ['queue:status:<taskId>', 'auth:x'] }), undefined);
  assert.deepEqual(unsatisfiablePart(ANONYMOUS, { AnyOf: ['auth:y', 'auth:x'] }), { AnyOf: ['auth:y', 'auth:x'] });
  // the part is checked unrendered: the caller's scopes never satisfy it
  const part = unsatisfiablePart(ANONYMOUS, CREATE_TASK)!;
  assert.equal(expressionSatisfied(ANONYMOUS, part), false);
});

test('a template it calls unsatisfiable is unsatisfied by every rendering (property)', () => {
  const text = fc.stringMatching(/^[a-c:*]{0,4}$/);
  const template = fc.array(fc.oneof(fc.stringMatching(/^[a-c:]{1,3}$/), fc.constantFrom('<x>', '<y>')), { minLength: 1, maxLength: 4 }).map((p) => p.join(''));
  const scope = fc.oneof(text, text.map((s) => `${s.replace(/\*/g, '')}*`));
  fc.assert(
    fc.property(fc.array(scope, { maxLength: 3 }), template, text, text, (have, t, x, y) => {
      const rendered = renderExpression(t, { x: x.replace(/\*/g, ''), y: y.replace(/\*/g, '') }) as string;
      if (expressionSatisfied(have, rendered)) assert.equal(unsatisfiablePart(have, t), undefined, `${JSON.stringify(have)} satisfy ${rendered}`);
    }),
    { numRuns: 5000 },
  );
});
