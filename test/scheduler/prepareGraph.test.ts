import { test } from 'node:test';
import assert from 'node:assert/strict';
import { loadConfig } from '../../src/config.js';
import { prepareGraphNodes } from '../../src/scheduler/prepareGraph.js';
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
  const tasks = JSON.parse(JSON.stringify({ a: { requires: ['__proto__'], reruns: 0, task: task(payload) } }));
  Object.defineProperty(tasks, '__proto__', { value: { requires: [], reruns: 0, task: task({}) }, enumerable: true });
  const { nodes, errors } = prepareGraphNodes({ config: loadConfig({}), taskGraphId: 'MsnEZT30SZylVJzK3pRaDg', graphRouting: '', tasks, now: new Date('2030-01-01T00:00:00Z') });
  assert.deepEqual([...errors], []);
  const a = nodes.find((n) => n.label === 'a');
  const proto = nodes.find((n) => n.label === '__proto__');
  assert.ok(a && proto);
  const stored = a.definition.payload as Record<string, Record<string, unknown>>;
  assert.deepEqual(Object.getOwnPropertyNames(stored['']), ['__proto__']);
  assert.equal(JSON.stringify(stored), JSON.stringify({ ...JSON.parse('{"": {"__proto__": false}, "deep": {"__proto__": {"x": 1}}}'), ref: proto.taskId }));
});

test('the CLI keeps a label named "__proto__" when it adds task defaults', () => {
  const tasks = JSON.parse('{"__proto__": {"task": {"provisionerId": "p", "workerType": "w", "payload": {}}}}');
  const out = withTaskDefaults(tasks, { now: Date.parse('2030-01-01T00:00:00Z'), owner: 'me@host', source: 'http://x/ui' });
  assert.deepEqual(Object.keys(out), ['__proto__']);
  assert.equal(Object.getPrototypeOf(out), Object.prototype);
});
