import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { mergeNormalized, normalizeScopes, RoleError, ScopeExpander, validateRoles, type Role } from '../../src/auth/roles.js';
import { expressionSatisfied, scopeSatisfied } from '../../src/auth/scopes.js';

// Cases follow the published examples of Taskcluster's scope resolver and scope library.

const roles = (spec: Record<string, string[]>): Role[] => Object.entries(spec).map(([roleId, scopes]) => ({ roleId, scopes }));
const expand = (spec: Record<string, string[]>, scopes: string[]) => new ScopeExpander(roles(spec)).expand(scopes);
const same = (actual: string[], expected: string[]) => assert.deepEqual(actual, normalizeScopes(expected));

test('scope satisfaction: exact match, a trailing * covers its prefix, nothing else', () => {
  assert.equal(scopeSatisfied(['a'], 'a'), true);
  assert.equal(scopeSatisfied(['a*'], 'a'), true);
  assert.equal(scopeSatisfied(['a*'], 'ab'), true);
  assert.equal(scopeSatisfied(['a*'], 'a*'), true);
  assert.equal(scopeSatisfied(['*'], 'anything:at:all'), true);
  assert.equal(scopeSatisfied(['a'], 'a*'), false, 'a plain scope does not cover a star scope');
  assert.equal(scopeSatisfied(['ab*'], 'a'), false);
  assert.equal(scopeSatisfied(['ab*'], 'a*'), false);
  assert.equal(scopeSatisfied(['a'], 'ab'), false);
  assert.equal(scopeSatisfied([], 'a'), false);
  assert.equal(expressionSatisfied(['a', 'b'], { AllOf: ['a', { AnyOf: ['c', 'b'] }] }), true);
  assert.equal(expressionSatisfied(['a'], { AllOf: ['a', { AnyOf: ['c', 'b'] }] }), false);
  assert.equal(expressionSatisfied([], { AllOf: [] }), true);
  assert.equal(expressionSatisfied(['x'], { AnyOf: [] }), false);
});

test('normalization: duplicates and scopes a * scope covers go', () => {
  same(normalizeScopes(['a', 'b', 'c*']), ['a', 'b', 'c*']);
  assert.deepEqual(normalizeScopes(['a*', 'ab', 'ac*', 'a']), ['a*']);
  assert.deepEqual(normalizeScopes(['b', 'a', 'b']), ['a', 'b']);
  assert.deepEqual(normalizeScopes(['*', 'assume:x', 'queue:y']), ['*']);
});

test('normalization keeps exactly the scopes no other scope of the set satisfies (property)', () => {
  const scope = fc.stringMatching(/^[ab:]{0,4}\*?$/);
  fc.assert(
    // up to 40 scopes: both the few-stars and the many-stars (prefix set) paths
    fc.property(fc.array(scope, { maxLength: 40 }), (scopes) => {
      const unique = [...new Set(scopes)];
      const expected = unique.filter((s) => !unique.some((o) => o !== s && scopeSatisfied([o], s))).sort();
      assert.deepEqual(normalizeScopes(scopes), expected);
    }),
    { numRuns: 2000 },
  );
});

const cases: Array<[string, Record<string, string[]>, string[], string[]]> = [
  ['scopes pass through', {}, ['a', 'b', 'c*'], ['a', 'b', 'c*']],
  ['assume:a* matches a, aa, ab and a*', { a: ['A'], aa: ['AA'], ab: ['AB'], 'a*': ['ASTAR'] }, ['assume:a*'], ['assume:a*', 'A', 'AA', 'AB', 'ASTAR']],
  ['assume:ab* matches ab and abc, not a', { a: ['A'], ab: ['AB'], abc: ['ABC'] }, ['assume:ab*'], ['assume:ab*', 'AB', 'ABC']],
  ['assume:a gets role a*, not ab*', { 'a*': ['ASTAR'], 'ab*': ['ABSTAR'] }, ['assume:a'], ['assume:a', 'ASTAR']],
  ['assume:ab gets ab* and a*', { 'ab*': ['ABSTAR'], 'a*': ['ASTAR'] }, ['assume:ab'], ['assume:ab', 'ABSTAR', 'ASTAR']],
  ['assume:a gets * and a*', { '*': ['STAR'], 'a*': ['ASTAR'] }, ['assume:a'], ['assume:a', 'STAR', 'ASTAR']],
  ['assume:aa* gets a* and aabc', { 'a*': ['ASTAR'], aabc: ['AABC'] }, ['assume:aa*'], ['assume:aa*', 'ASTAR', 'AABC']],
  ['* gets everything (and stays *)', { a: ['A'], b: ['B'] }, ['*'], ['*']],
  ['a* (a prefix of assume:) gets every role', { a: ['A'], b: ['B'], c: ['C'] }, ['a*'], ['a*', 'A', 'B', 'C']],
  ['assume* gets every role', { a: ['A'], b: ['B'] }, ['assume*'], ['assume*', 'A', 'B']],
  ['assume:* gets every role', { a: ['A'], b: ['B'] }, ['assume:*'], ['assume:*', 'A', 'B']],
  ['assum* gets every role', { a: ['A'], b: ['B'] }, ['assum*'], ['assum*', 'A', 'B']],
  ['as* gets every role', { a: ['A'] }, ['as*'], ['as*', 'A']],
  [':* expands nothing', { a: ['A'] }, [':*'], [':*']],
  [':assume* expands nothing', { a: ['A'] }, [':assume*'], [':assume*']],
  ['exact match ab', { a: ['A'], ab: ['AB'], abc: ['ABC'] }, ['assume:ab'], ['assume:ab', 'AB']],
  ['ab matches ab and a*', { 'a*': ['ASTAR'], ab: ['AB'], abc: ['ABC'] }, ['assume:ab'], ['assume:ab', 'ASTAR', 'AB']],
  ['roles assume roles (transitively)', { a: ['assume:b', 'A'], b: ['assume:c', 'B'], c: ['C'] }, ['assume:a'], ['assume:a', 'assume:b', 'assume:c', 'A', 'B', 'C']],
  ['parameterized role', { 'a*': ['A<..>'] }, ['assume:abc'], ['assume:abc', 'Abc']],
  ['parameterized role matched with *', { 'a*': ['A<..>'] }, ['assume:abc*'], ['assume:abc*', 'Abc*']],
  ['parameterized role with a suffix', { 'a*': ['A<..>X'] }, ['assume:abc'], ['assume:abc', 'AbcX']],
  ['parameterized role with a suffix, matched with * (the suffix goes)', { 'a*': ['A<..>X'] }, ['assume:abc*'], ['assume:abc*', 'Abc*']],
  ['parameterized role matched by a shorter *', { 'abc*': ['ABC<..>DEF'] }, ['assume:a*'], ['assume:a*', 'ABC*']],
  ['project roles: repo:* with <..>', { 'repo:github.com/*': ['queue:route:index.<..>.*', 'assume:project:ci'], 'project:ci': ['queue:create-task:highest:proj/ci'] },
    ['assume:repo:github.com/org/app'],
    ['assume:repo:github.com/org/app', 'queue:route:index.org/app.*', 'assume:project:ci', 'queue:create-task:highest:proj/ci']],
  ['a plain role does not substitute <..>', { a: ['A<..>'] }, ['assume:a'], ['assume:a', 'A<..>']],
];

for (const [name, spec, scopes, expected] of cases) {
  test(`expansion: ${name}`, () => same(expand(spec, scopes), expected));
}

test('two normalized sets merged are their union normalized (property; how an expansion joins a set to what it assumes)', () => {
  const scope = fc.stringMatching(/^[ab:]{0,4}\*?$/);
  fc.assert(
    fc.property(fc.array(scope, { maxLength: 20 }), fc.array(scope, { maxLength: 20 }), (a, b) => {
      assert.deepEqual(mergeNormalized(normalizeScopes(a), normalizeScopes(b)), normalizeScopes([...a, ...b]));
    }),
    { numRuns: 2000 },
  );
  // sets that mostly hold more than 16 star scopes once normalized (27 prefixes of length 3 cannot cover one another):
  // the prefix-set path
  const many = fc.array(fc.oneof({ arbitrary: fc.stringMatching(/^[ab:]{3}\*$/), weight: 2 }, { arbitrary: fc.stringMatching(/^[ab:]{0,5}$/), weight: 1 }), { minLength: 30, maxLength: 60 });
  fc.assert(
    fc.property(many, many, (a, b) => {
      assert.deepEqual(mergeNormalized(normalizeScopes(a), normalizeScopes(b)), normalizeScopes([...a, ...b]));
    }),
    { numRuns: 300 },
  );
});

test('expansion is cached per assume set and unchanged on a second call; other scopes pass through', () => {
  const expander = new ScopeExpander(roles({ 'project:*': ['P<..>'] }));
  const first = expander.expand(['assume:project:x', 'q']);
  assert.deepEqual(expander.expand(['assume:project:x', 'r']), normalizeScopes(['assume:project:x', 'Px', 'r']));
  assert.deepEqual(first, normalizeScopes(['assume:project:x', 'Px', 'q']));
});

test('a remembered expansion is answered as a new array each time, and scope sets are told apart exactly', () => {
  const expander = new ScopeExpander(roles({ anonymous: ['A'], 'project:*': ['P<..>'] }));
  const first = expander.expand(['assume:anonymous', 'assume:project:x']);
  first.push('mutated');
  assert.deepEqual(expander.expand(['assume:anonymous', 'assume:project:x']), normalizeScopes(['assume:anonymous', 'A', 'assume:project:x', 'Px']));
  // joined with a newline these two sets would be one key
  assert.deepEqual(expander.expand(['assume:project:x\nassume:anonymous']), normalizeScopes(['assume:project:x\nassume:anonymous', 'Px\nassume:anonymous']));
  assert.deepEqual(expander.expand(['assume:project:x', 'assume:anonymous']), normalizeScopes(['assume:anonymous', 'A', 'assume:project:x', 'Px']));
});

test('expansion is a closure: expanding its result again adds nothing (property; the authenticator expands once)', () => {
  // role ids and scopes over a small alphabet, so roles assume each other, prefix roles take parameters and star
  // scopes cover others; role sets validateRoles refuses (cycles) are skipped, as they cannot be stored
  const id = fc.stringMatching(/^[ab]{1,3}\*?$/);
  const scope = fc.oneof(
    fc.stringMatching(/^[AB]{1,2}\*?$/),
    id.map((r) => `assume:${r}`),
    fc.stringMatching(/^[ab]{0,2}$/).map((r) => `assume:${r}<..>`),
    fc.constantFrom('assume*', 'a*', '*'),
  );
  fc.assert(
    fc.property(fc.dictionary(id, fc.array(scope, { maxLength: 3 }), { maxKeys: 5 }), fc.array(scope, { maxLength: 4 }), (spec, scopes) => {
      const set = roles(spec);
      try {
        validateRoles(set);
      } catch {
        fc.pre(false);
      }
      const expander = new ScopeExpander(set);
      const once = expander.expand(scopes);
      assert.deepEqual(new ScopeExpander(set).expand(once), once);
    }),
    { numRuns: 2000 },
  );
});

const valid = (spec: Record<string, string[]>) => assert.doesNotThrow(() => validateRoles(roles(spec)));
const refused = (spec: Record<string, string[]>, kind: RoleError['kind']) =>
  assert.throws(() => validateRoles(roles(spec)), (err: unknown) => err instanceof RoleError && err.kind === kind);

test('validateRoles: DAGs are fine, cycles and ambiguous parameters are refused', () => {
  valid({ a: ['A'], b: ['B'] });
  valid({ a: ['assume:c'], b: ['assume:c'], c: ['assume:e'] });
  refused({ a: ['assume:c'], b: ['assume:c'], c: ['assume:a'] }, 'DependencyCycle');
  valid({ 'a*': ['assume:c'], 'b*': ['assume:c'], 'c*': ['assume:e'] });
  refused({ 'a*': ['assume:c'], 'b*': ['assume:c'], 'c*': ['assume:a'] }, 'DependencyCycle');
  valid({ 'a*': ['assume:b<..>'] });
  valid({ 'a*': ['assume:b<..>c*'] });
  refused({ 'a*': ['assume:b*<..>'] }, 'InvalidScope');
  refused({ 'a*': ['assume:b<..>c<..>'] }, 'InvalidScope');
  valid({ 'a*': ['assume:c<..>A'], 'b*': ['assume:c<..>B*'], 'c*': ['assume:e<..>'] });
  refused({ 'a*': ['assume:c<..>A'], 'b*': ['assume:c<..>B*'], 'c*': ['assume:a<..>'] }, 'DependencyCycle');
  refused({ 'a*': ['assume:c<..>A'], 'b*': ['assume:c<..>B*'], 'c*': ['assume:b'] }, 'DependencyCycle');
  refused({ abc: ['assume:abc'] }, 'DependencyCycle');
  refused({ abc: ['assume:ab*'] }, 'DependencyCycle');
  refused({ 'ab*': ['assume:abc'] }, 'DependencyCycle');
  refused({ 'a*': ['assume:a<..>x'] }, 'DependencyCycle');
  valid({ abc: ['assume:def'], def: ['assume:ghi'], ghi: ['assume:jkl'], jkl: ['assume:abcd'] });
  valid({ abc: ['assume:d*'], def: ['assume:ghi'], 'g*': ['assume:jkl'], jkl: ['assume:ab'] });
});
