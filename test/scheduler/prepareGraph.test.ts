import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config.js';
import { prepareNode, substitute } from '../../src/scheduler/prepareGraph.js';
import { withTaskDefaults } from '../../src/cli/graphFile.js';

const task = (payload: unknown) => ({
  provisionerId: 'p',
  workerType: 'w',
  created: '2030-01-01T00:00:00.000Z',
  deadline: '2030-01-02T00:00:00.000Z',
  payload,
  metadata: { name: 'n', description: 'd', owner: 'o@example.com', source: 'https://example.com/' },
});

// JSON (and jsonb) allow a key named "__proto__"; copying an object by assignment turns it into a prototype and
// loses it (found by test/security/fuzzGraphs.test.ts)
test('$subs substitution keeps own "__proto__" keys of a payload, and labels named "__proto__"', () => {
  const payload = JSON.parse('{"": {"__proto__": false}, "deep": {"__proto__": {"x": 1}}, "ref": {"$subs": "taskId:__proto__"}}');
  const node = JSON.parse(JSON.stringify({ requires: ['__proto__'], reruns: 0, task: task(payload) }));
  const named: string[] = [];
  const ids = new Map<string, string>([['__proto__', 'PRvFxk4ZQpuq3Tn4MGyW9A']]);
  const prepared = prepareNode({
    config: loadConfig({}), taskGraphId: 'MsnEZT30SZylVJzK3pRaDg', graphRouting: '', label: 'a', node, taskId: 'AAAAAAAAQAqAAAAAAAAAAA',
    taskIdOf: (label) => ids.get(label) as string, onSubs: (label) => named.push(label), now: new Date('2030-01-01T00:00:00Z'),
  });
  assert.ok('definition' in prepared, JSON.stringify(prepared));
  assert.deepEqual(named, ['__proto__']);
  const stored = prepared.definition.payload as Record<string, Record<string, unknown>>;
  assert.deepEqual(Object.getOwnPropertyNames(stored['']), ['__proto__']);
  assert.equal(JSON.stringify(stored), JSON.stringify({ ...JSON.parse('{"": {"__proto__": false}, "deep": {"__proto__": {"x": 1}}}'), ref: 'PRvFxk4ZQpuq3Tn4MGyW9A' }));
  assert.deepEqual(prepared.definition.dependencies, ['PRvFxk4ZQpuq3Tn4MGyW9A']);
});

test('the CLI keeps a label named "__proto__" when it adds task defaults', () => {
  const tasks = JSON.parse('{"__proto__": {"task": {"provisionerId": "p", "workerType": "w", "payload": {}}}}');
  const out = withTaskDefaults(tasks, { now: Date.parse('2030-01-01T00:00:00Z'), owner: 'me@host', source: 'http://x/ui' });
  assert.deepEqual(Object.keys(out), ['__proto__']);
  assert.equal(Object.getPrototypeOf(out), Object.prototype);
});

test('a node is validated on its own copy: the graph as given is left as it was, defaults and all', () => {
  const node = { requires: [], reruns: 0, task: task({ nested: { a: [1, { $subs: 'taskId:b' }] } }) };
  const given = JSON.stringify(node);
  const prepare = () =>
    prepareNode({
      config: loadConfig({}), taskGraphId: 'MsnEZT30SZylVJzK3pRaDg', graphRouting: 'r', label: 'a', node, taskId: 'AAAAAAAAQAqAAAAAAAAAAA',
      taskIdOf: () => 'PRvFxk4ZQpuq3Tn4MGyW9A', onSubs: () => undefined, now: new Date('2030-01-01T00:00:00Z'),
    });
  const first = prepare();
  assert.ok('definition' in first, JSON.stringify(first));
  // validation filled defaults into the definition (scopes, tags, ...) but not into the node
  assert.deepEqual(first.definition.scopes, []);
  assert.equal(JSON.stringify(node), given);
  const second = prepare();
  assert.ok('definition' in second);
  assert.notEqual(second.definition.payload, first.definition.payload);
  assert.deepEqual(second.definition, first.definition);
});

test('a node without any $subs is not copied by the substitution, and still validated on a copy of its own', () => {
  const node = { requires: [], reruns: 0, task: task({ nested: { a: [1, { b: 'c' }] }, list: [[]] }) };
  const given = JSON.stringify(node);
  const seen: unknown[] = [];
  assert.equal(substitute(node.task, (label) => { seen.push(label); return ''; }, []), node.task);
  assert.deepEqual(seen, []);
  const prepared = prepareNode({
    config: loadConfig({}), taskGraphId: 'MsnEZT30SZylVJzK3pRaDg', graphRouting: 'r', label: 'a', node, taskId: 'AAAAAAAAQAqAAAAAAAAAAA',
    taskIdOf: () => 'PRvFxk4ZQpuq3Tn4MGyW9A', onSubs: () => undefined, now: new Date('2030-01-01T00:00:00Z'),
  });
  assert.ok('definition' in prepared, JSON.stringify(prepared));
  assert.notEqual(prepared.definition.payload, node.task.payload);
  (prepared.definition.payload as { nested: { a: unknown[] } }).nested.a.push('changed');
  assert.equal(JSON.stringify(node), given);
  // one $subs deep in an array copies the containers on its way only
  const mixed = { keep: { x: 1 }, list: [{ y: 2 }, { $subs: 'taskId:b' }] };
  const out = substitute(mixed, () => 'PRvFxk4ZQpuq3Tn4MGyW9A', []) as typeof mixed;
  assert.deepEqual(out, { keep: { x: 1 }, list: [{ y: 2 }, 'PRvFxk4ZQpuq3Tn4MGyW9A'] });
  assert.equal(out.keep, mixed.keep);
  assert.notEqual(out.list, mixed.list);
  assert.deepEqual(mixed.list[1], { $subs: 'taskId:b' });
});

test('dates are read and written the same for every task that shares them, and an unreadable one is refused each time', () => {
  const prepare = (fields: Record<string, string>) =>
    prepareNode({
      config: loadConfig({}), taskGraphId: 'MsnEZT30SZylVJzK3pRaDg', graphRouting: '', label: 'a', node: { requires: [], reruns: 0, task: { ...task({}), ...fields } },
      taskId: 'AAAAAAAAQAqAAAAAAAAAAA', taskIdOf: () => 'PRvFxk4ZQpuq3Tn4MGyW9A', onSubs: () => undefined, now: new Date('2030-01-01T00:00:00Z'),
    });
  for (let i = 0; i < 3; i++) {
    const offset = prepare({ created: '2030-01-01T01:00:00+01:00', deadline: '2030-01-01T12:00:00.5Z', expires: '2030-06-01T00:00:00Z' });
    assert.ok('definition' in offset, JSON.stringify(offset));
    assert.deepEqual([offset.definition.created, offset.definition.deadline, offset.definition.expires], ['2030-01-01T00:00:00.000Z', '2030-01-01T12:00:00.500Z', '2030-06-01T00:00:00.000Z']);
    const defaulted = prepare({ deadline: '2030-01-01T12:00:00.5Z' });
    assert.ok('definition' in defaulted);
    assert.equal(defaulted.definition.expires, '2031-01-01T12:00:00.500Z');
    const leap = prepare({ deadline: '2030-06-30T23:59:60Z' });
    assert.ok('errors' in leap);
    assert.match(leap.errors.join('\n'), /task\.deadline "2030-06-30T23:59:60Z" is not a date tgs can read/);
  }
});
