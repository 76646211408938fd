import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cacheKey, differingInputs, differingPaths, keyInputs, type CacheKeyInputs } from '../../src/taskCache/key.js';
import { computeNodeKeys, type HeldNode } from '../../src/taskCache/graphKeys.js';
import { cacheSpec, effectiveMode, type CacheSpec } from '../../src/taskCache/spec.js';
import { parseCacheTiers, tiersToSearch } from '../../src/taskCache/tiers.js';
import { substitute } from '../../src/scheduler/prepareGraph.js';

const inputs = (over: Partial<CacheKeyInputs> = {}): CacheKeyInputs =>
  keyInputs({ name: 'toolchain', digestData: { v: 1 }, taskQueueId: 'p/w', payload: { cmd: ['make'] }, scopes: ['b', 'a'], requires: [], ...over });

test('a key is the same for the same inputs whatever the order of keys, scopes and requires, and differs for any input changed', () => {
  const k = cacheKey(inputs());
  assert.match(k, /^[0-9a-f]{64}$/);
  assert.equal(cacheKey(inputs({ scopes: ['a', 'b'] })), k);
  assert.equal(cacheKey(keyInputs({ ...inputs(), payload: { cmd: ['make'] } })), k);
  for (const over of [{ name: 'other' }, { digestData: { v: 2 } }, { taskQueueId: 'p/x' }, { payload: { cmd: ['make', '-j'] } }, { scopes: ['a'] }, { requires: ['k'] }]) {
    assert.notEqual(cacheKey(inputs(over)), k, JSON.stringify(over));
    assert.deepEqual(differingInputs(inputs(), inputs(over)), [Object.keys(over)[0]]);
  }
});

test('differingPaths points at the changed places of a payload as JSON pointers', () => {
  assert.deepEqual(differingPaths({ a: 1, b: { c: [1, 2] } }, { a: 1, b: { c: [1, 3] } }), ['/b/c/1']);
  assert.deepEqual(differingPaths({ a: 1 }, { a: 1, 'x/y': 2 }), ['/x~1y']);
  assert.deepEqual(differingPaths('a', 'b'), ['/']);
  assert.deepEqual(differingPaths({ same: true }, { same: true }), []);
});

const spec = (name: string): CacheSpec => ({ name, tier: 'default', digestData: null, maxAgeS: undefined, mode: 'use' });
const labels = ['a', 'b', 'c', 'd'];
const names = (existing: Record<number, string> = {}) => ({
  labelAt: (idx: number) => labels[idx],
  slot: (label: string) => labels.indexOf(label),
  existingKey: (idx: number) => existing[idx],
  substitute: (payload: unknown, replace: (label: string) => unknown) => substitute(payload, replace, []),
});
const held = (idx: number, requires: number[], payload: unknown = {}): HeldNode => ({ idx, label: labels[idx], spec: spec(labels[idx]), rawPayload: payload, requires, taskQueueId: 'p/w', scopes: [] });

test('keys chain through dependencies: a dependency\'s $subs becomes its key, so a change upstream changes every key downstream', () => {
  const chain = (aPayload: unknown) => computeNodeKeys([held(2, [1], { up: { $subs: 'taskId:b' } }), held(1, [0]), held(0, [], aPayload)], names());
  const one = chain({ x: 1 });
  const again = chain({ x: 1 });
  const changed = chain({ x: 2 });
  assert.deepEqual(one.errors, []);
  for (const idx of [0, 1, 2]) {
    assert.equal(one.keys.get(idx)?.key, again.keys.get(idx)?.key);
    assert.notEqual(one.keys.get(idx)?.key, changed.keys.get(idx)?.key, `node ${idx}`);
  }
  assert.deepEqual(one.keys.get(2)?.inputs.payload, { up: { $subs: `cache-key:${one.keys.get(1)?.key}` } });
  assert.deepEqual(one.keys.get(2)?.inputs.requires, [one.keys.get(1)?.key]);
});

test('security review 2026-11-28 #7: a payload cannot hold text that stands for a dependency\'s key, so it never shares the key of a graph whose $subs names it', () => {
  const genuine = computeNodeKeys([held(1, [0], { dep: { $subs: 'taskId:a' } }), held(0, [])], names());
  const depKey = genuine.keys.get(0)?.key as string;
  // the review's forgery: the dependency's key (public through the cache API) written literally where the $subs was
  for (const forged of [`cache-key:${depKey}`, { $subs: `cache-key:${depKey}` }]) {
    const errors: string[] = [];
    const attempt = computeNodeKeys([held(1, [0], { dep: forged }), held(0, [])], {
      ...names(),
      substitute: (payload: unknown, replace: (label: string) => unknown) => substitute(payload, replace, errors),
    });
    if (typeof forged === 'string') assert.notEqual(attempt.keys.get(1)?.key, genuine.keys.get(1)?.key);
    // the object form is refused by the intake (a $subs that is not `taskId:<label>`) before any key is used
    else assert.match(errors.join('\n'), /bad \$subs .*expected exactly \{"\$subs": "taskId:<label>"\}/);
  }
});

test('a cached node requiring (or naming in $subs) a node that is not cached is refused naming both; an existing cached node counts', () => {
  const r = computeNodeKeys([held(1, [0]), held(2, [], { x: { $subs: 'taskId:d' } })], names());
  assert.deepEqual(r.errors.map(([l, m]) => [l, m.split(',')[0]]), [
    ['b', 'is cached and requires "a"'],
    ['c', 'is cached and names in a $subs "d"'],
  ]);
  const ok = computeNodeKeys([held(1, [0])], names({ 0: 'f'.repeat(64) }));
  assert.deepEqual(ok.errors, []);
  assert.deepEqual(ok.keys.get(1)?.inputs.requires, ['f'.repeat(64)]);
});

test('a $subs cycle between cached nodes is refused; a diamond computes each key once', () => {
  const cycle = computeNodeKeys([held(0, [], { x: { $subs: 'taskId:b' } }), held(1, [], { y: { $subs: 'taskId:a' } })], names());
  assert.equal(cycle.errors.length, 1);
  assert.match(cycle.errors[0][1], /a \$subs cycle/);
  const diamond = computeNodeKeys([held(3, [1, 2]), held(1, [0]), held(2, [0]), held(0, [])], names());
  assert.deepEqual(diamond.errors, []);
  assert.equal(diamond.keys.size, 4);
});

test('a chain of 50,000 cached nodes computes without recursion (a recursive walk overflows the stack well before)', () => {
  const n = 50_000;
  const many: HeldNode[] = [];
  for (let i = 0; i < n; i++) many.push({ idx: i, label: `n${i}`, spec: spec('n'), rawPayload: { i }, requires: i > 0 ? [i - 1] : [], taskQueueId: 'p/w', scopes: [] });
  const r = computeNodeKeys(many.reverse(), { labelAt: (i) => `n${i}`, slot: (l) => Number(l.slice(1)), existingKey: () => undefined, substitute: (p, r) => substitute(p, r, []) });
  assert.equal(r.keys.size, n);
});

test('specs: the lowest tier by default, maxAge as seconds or a duration, unknown tiers refused; the graph mode only turns caching down', () => {
  const tiers = ['level-3', 'level-1'];
  assert.deepEqual(cacheSpec({ name: 'x' }, tiers), { name: 'x', tier: 'level-1', digestData: null, maxAgeS: undefined, mode: 'use' });
  assert.equal((cacheSpec({ name: 'x', maxAge: '2 days' }, tiers) as CacheSpec).maxAgeS, 172_800);
  assert.equal((cacheSpec({ name: 'x', maxAge: 30 }, tiers) as CacheSpec).maxAgeS, 30);
  assert.deepEqual(cacheSpec({ name: 'x', tier: 'level-2' }, tiers), { errors: ['cache.tier "level-2" is not a tier of this deployment (TGS_CACHE_TIERS: level-3, level-1)'] });
  assert.match((cacheSpec({ name: 'x', maxAge: 'soon' }, tiers) as { errors: string[] }).errors[0], /write seconds, or a duration/);
  assert.equal(effectiveMode('use', 'refresh'), 'refresh');
  assert.equal(effectiveMode('off', 'refresh'), 'off');
  assert.equal(effectiveMode('refresh', 'use'), 'refresh');
  assert.equal(effectiveMode('use', 'off'), 'off');
});

test('tiers: TGS_CACHE_TIERS parsed highest first; a lookup searches its own tier and those above it, never below', () => {
  assert.deepEqual(parseCacheTiers(undefined), ['default']);
  const tiers = parseCacheTiers('level-3, level-2,level-1');
  assert.deepEqual(tiers, ['level-3', 'level-2', 'level-1']);
  assert.deepEqual(tiersToSearch(tiers, 'level-1'), ['level-3', 'level-2', 'level-1']);
  assert.deepEqual(tiersToSearch(tiers, 'level-3'), ['level-3']);
  assert.throws(() => parseCacheTiers('a.b'), /TGS_CACHE_TIERS/);
  assert.throws(() => parseCacheTiers('a,a'), /twice/);
});
