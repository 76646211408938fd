import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config.js';
import { prepareNode } from '../../src/scheduler/prepareGraph.js';
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
