import { test } from 'node:test';
import assert from 'node:assert/strict';
import { cutoffCandidates, planAmend, summarize, type IncomingNode, type StoredNode } from '../../src/scheduler/amendPlan.js';
import { nodeDigests } from '../../src/scheduler/nodeDigests.js';

const hex = (node: { task: Record<string, unknown> }) => {
  const d = nodeDigests(node);
  return { digest: d.digest.toString('hex'), workDigest: d.workDigest.toString('hex') };
};
const stored = (label: string, idx: number, node: { task: Record<string, unknown> }): StoredNode => ({ label, idx, taskId: `t${idx}`, state: 'completed', ...hex(node) });
const incoming = (label: string, node: { task: Record<string, unknown> }, dependsOn: string[] = []): IncomingNode => ({ label, ...hex(node), dependsOn });

const t = (payload: unknown, extra: Record<string, unknown> = {}) => ({ requires: [], task: { payload, ...extra } });

test('the work digest ignores exactly the metadata fields', () => {
  const base = nodeDigests(t({ a: 1 }, { deadline: 'x', priority: 'low' }));
  const meta = nodeDigests(t({ a: 1 }, { deadline: 'y', priority: 'high', routes: ['r'], tags: { k: 'v' }, metadata: { name: 'n' }, created: 'c', expires: 'e' }));
  assert.notEqual(base.digest.toString('hex'), meta.digest.toString('hex'));
  assert.equal(base.workDigest.toString('hex'), meta.workDigest.toString('hex'));
  assert.notEqual(nodeDigests(t({ a: 2 })).workDigest.toString('hex'), nodeDigests(t({ a: 1 })).workDigest.toString('hex'));
});

test('each label is classified; dependents of a changed label rerun transitively; a label with no stored digest counts as changed', () => {
  const old = [
    stored('lint', 0, t('lint')),
    stored('build', 1, t('make')),
    stored('test', 2, t('test')),
    stored('package', 3, t('pkg')),
    stored('docs', 4, t('docs')),
    stored('gone', 5, t('gone')),
    { label: 'legacy', idx: 6, taskId: 't6', state: 'completed' },
  ];
  const plan = planAmend(old, [
    incoming('lint', t('lint')),
    incoming('build', t('make # comment')),
    incoming('test', t('test', { priority: 'high' }), ['build']),
    incoming('package', t('pkg'), ['test']),
    incoming('docs', t('docs', { priority: 'high' })),
    incoming('new', t('new'), ['lint']),
    incoming('legacy', t('legacy')),
  ]);
  assert.deepEqual(summarize(plan), {
    changed: ['build', 'legacy'],
    metadata: ['docs'],
    added: ['new'],
    dependent: ['package', 'test'],
    removed: ['gone'],
    unchanged: 1,
  });
  assert.deepEqual(plan.replaced, ['build', 'test', 'package', 'new', 'legacy']);
  assert.deepEqual(plan.patched, ['docs']);
  assert.deepEqual(plan.removed, ['gone']);
});

test('cutoff candidates: completed dependents whose replaced inputs are all required, with the old taskIds of those inputs', () => {
  const old = [
    stored('build', 0, t('make')),
    stored('test', 1, t('test')),
    { ...stored('flaky', 2, t('flaky')), state: 'failed' },
    stored('pkg', 3, t('pkg')),
    stored('subsOnly', 4, t('reads build by $subs')),
    stored('lint', 5, t('lint')),
    stored('ship', 6, t('ship: requires pkg, reads build by $subs')),
  ];
  const files = [
    incoming('build', t('make # comment'), []),
    incoming('test', t('test'), ['build']),
    incoming('flaky', t('flaky'), ['build']),
    incoming('pkg', t('pkg'), ['test', 'lint']),
    incoming('subsOnly', t('reads build by $subs'), ['build']),
    incoming('lint', t('lint'), []),
    incoming('ship', t('ship: requires pkg, reads build by $subs'), ['pkg', 'build']),
  ];
  const requires: Record<string, string[]> = { test: ['build'], flaky: ['build'], pkg: ['test', 'lint'], subsOnly: [], ship: ['pkg'] };
  const plan = planAmend(old, files);
  const candidates = cutoffCandidates(plan, old, files, (label) => requires[label] ?? []);
  assert.deepEqual(Object.fromEntries(candidates), {
    // test's input build was replaced; pkg's input test was replaced (lint was kept, so it is no input)
    test: { from: 't1', inputs: [{ label: 'build', old: 't0' }] },
    pkg: { from: 't3', inputs: [{ label: 'test', old: 't1' }] },
    // build is named only in $subs, but required through pkg and test: it has resolved before ship is ready
    ship: { from: 't6', inputs: [{ label: 'build', old: 't0' }, { label: 'pkg', old: 't3' }] },
  });
  // flaky never completed (nothing known to keep); subsOnly reads build only through $subs and does not require it
  assert.equal(plan.classes.get('flaky'), 'dependent');
  assert.equal(plan.classes.get('subsOnly'), 'dependent');
});
