import { test } from 'node:test';
import assert from 'node:assert/strict';
import { prepareAmend, sameJson, type FileNode } from '../../src/ui/components/amendFile.js';
import { planAmend, type IncomingNode, type StoredNode } from '../../src/scheduler/amendPlan.js';
import { nodeDigests } from '../../src/scheduler/nodeDigests.js';
import { substitute } from '../../src/scheduler/prepareGraph.js';

// The body the graph page's Amend sends (src/ui/components/amendFile.ts): times move exactly for the labels that get new
// tasks or a patch, and the server's classification of the result is the one the edit asked for.

const HOUR = 3600_000;
const submitted = Date.parse('2026-11-28T10:00:00.000Z');
const now = submitted + 3 * HOUR;
const task = (name: string, payload: Record<string, unknown> = {}) => ({
  provisionerId: 'p',
  workerType: 'w',
  created: new Date(submitted).toISOString(),
  deadline: new Date(submitted + 24 * HOUR).toISOString(),
  expires: new Date(submitted + 48 * HOUR).toISOString(),
  payload: { name, ...payload },
  metadata: { name, description: name, owner: 'o@example.com', source: 'https://example.com' },
});
/** A graph's file as GET .../file gives it back: the schema's defaults filled. */
const stored: Record<string, FileNode> = {
  fetch: { requires: [], reruns: 0, task: task('fetch') },
  build: { requires: ['fetch'], reruns: 0, task: task('build') },
  test: { requires: [], reruns: 0, task: task('test', { binary: { $subs: 'taskId:build' } }) },
  lint: { requires: [], reruns: 0, task: task('lint') },
  docs: { requires: [], reruns: 0, task: task('docs') },
};

/** The server's classes of the prepared file against the stored one (src/scheduler/amendPlan.ts, its digests). */
function classify(tasks: Record<string, FileNode>) {
  const digests = (node: FileNode) => {
    const d = nodeDigests(node as { task: Record<string, unknown> });
    return { digest: d.digest.toString('hex'), workDigest: d.workDigest.toString('hex') };
  };
  const old: StoredNode[] = Object.entries(stored).map(([label, node], idx) => ({ label, idx, taskId: label, state: 'completed', ...digests(node) }));
  const subs = (node: FileNode) => {
    const names: string[] = [];
    substitute(node.task, (name) => names.push(name), []);
    return names;
  };
  const incoming: IncomingNode[] = Object.entries(tasks).map(([label, node]) => ({ label, ...digests(node), dependsOn: [...(node.requires ?? []), ...subs(node)] }));
  return Object.fromEntries(planAmend(old, incoming).classes);
}

test('an unedited file goes back byte for byte: every label unchanged, no time moved', () => {
  const { tasks, retimed } = prepareAmend(stored, structuredClone(stored), now);
  assert.deepEqual(tasks, stored);
  assert.deepEqual(retimed, []);
  assert.ok(Object.values(classify(tasks)).every((c) => c === 'unchanged'));
});

test('a command edited: that label and what depends on it (requires and $subs) get created now and their deadline moved by as much; a metadata edit only created', () => {
  const edited = structuredClone(stored);
  (edited.fetch.task.payload as Record<string, unknown>).name = 'fetch --depth 1';
  edited.lint.task.priority = 'high';
  // left out by the editor: the schema's defaults make it the same node
  delete edited.docs.requires;
  delete edited.docs.reruns;
  const { tasks, retimed } = prepareAmend(stored, edited, now);
  assert.deepEqual(retimed, ['build', 'fetch', 'lint', 'test']);
  for (const label of ['fetch', 'build', 'test']) {
    assert.equal(tasks[label].task.created, new Date(now).toISOString(), label);
    assert.equal(tasks[label].task.deadline, new Date(now + 24 * HOUR).toISOString(), `${label}: the same time budget`);
    assert.equal(tasks[label].task.expires, new Date(now + 48 * HOUR).toISOString(), label);
  }
  assert.equal(tasks.lint.task.created, new Date(now).toISOString());
  assert.equal(tasks.lint.task.deadline, stored.lint.task.deadline, 'a patched deadline is only what the edit says');
  assert.deepEqual(tasks.docs, stored.docs);
  assert.deepEqual(classify(tasks), { fetch: 'changed', build: 'dependent', test: 'dependent', lint: 'metadata', docs: 'unchanged' });
});

test('times the edit set itself are kept; an added label keeps its own; a removed one is simply absent', () => {
  const edited = structuredClone(stored);
  (edited.build.task.payload as Record<string, unknown>).name = 'build -j8';
  const ownDeadline = new Date(now + 2 * HOUR).toISOString();
  edited.build.task.deadline = ownDeadline;
  const addedCreated = new Date(now - 60_000).toISOString();
  edited.package = { requires: ['build'], task: { ...task('package'), created: addedCreated } };
  delete edited.docs;
  const { tasks, retimed } = prepareAmend(stored, edited, now);
  assert.equal(tasks.build.task.deadline, ownDeadline);
  assert.equal(tasks.build.task.created, new Date(now).toISOString());
  assert.equal(tasks.package.task.created, addedCreated);
  assert.deepEqual(tasks.package.reruns, 0);
  assert.deepEqual(retimed, ['build', 'test']);
  assert.equal(tasks.docs, undefined);
  const classes = classify(tasks);
  assert.equal(classes.docs, 'removed');
  assert.equal(classes.package, 'added');
  assert.equal(classes.test, 'dependent');
});

test('sameJson ignores key order only', () => {
  assert.ok(sameJson({ a: 1, b: [1, { c: 2, d: 3 }] }, { b: [1, { d: 3, c: 2 }], a: 1 }));
  assert.ok(!sameJson({ a: [1, 2] }, { a: [2, 1] }));
  assert.ok(!sameJson({ a: 1 }, { a: 1, b: undefined }));
  assert.ok(!sameJson({ a: {} }, { a: [] }));
  assert.ok(!sameJson(null, {}));
});
