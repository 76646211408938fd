import { test } from 'node:test';
import assert from 'node:assert/strict';
import { StatementBatcher } from '../../src/db/statementBatcher.js';

/** A statement whose calls the test completes by hand: each call's items, and a way to answer or fail it. */
function heldStatement() {
  const calls: { items: string[]; answer: () => void; fail: (err: Error) => void }[] = [];
  const run = (items: string[]) =>
    new Promise<string[]>((resolve, reject) => {
      calls.push({ items, answer: () => resolve(items.map((i) => `done ${i}`)), fail: reject });
    });
  return { calls, run };
}

const key = (item: string) => item.split('#')[0];

test('an item alone goes at once; items that arrive while the lane is busy go together in the next statement, each answered', async () => {
  const { calls, run } = heldStatement();
  const sizes: number[] = [];
  const batcher = new StatementBatcher(run, { lanes: 1, maxItems: 10, key, onBatch: (n) => sizes.push(n) });
  const a = batcher.submit('a');
  assert.deepEqual(calls.map((c) => c.items), [['a']], 'the first item did not wait');
  const rest = ['b', 'c', 'd'].map((i) => batcher.submit(i));
  assert.equal(calls.length, 1, 'nothing else runs while the one lane is busy');
  calls[0].answer();
  assert.equal(await a, 'done a');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(calls.map((c) => c.items), [['a'], ['b', 'c', 'd']]);
  calls[1].answer();
  assert.deepEqual(await Promise.all(rest), ['done b', 'done c', 'done d']);
  assert.deepEqual(sizes, [1, 3]);
});

test('items with the same key never share a statement, and a statement takes at most maxItems', async () => {
  const { calls, run } = heldStatement();
  const batcher = new StatementBatcher(run, { lanes: 1, maxItems: 3, key });
  const all = ['x', 'a#1', 'a#2', 'b', 'c', 'd', 'a#3'].map((i) => batcher.submit(i));
  for (let answered = 0; answered < calls.length; answered++) {
    calls[answered].answer();
    await new Promise((r) => setImmediate(r));
  }
  assert.deepEqual(calls.map((c) => c.items), [['x'], ['a#1', 'b', 'c'], ['a#2', 'd'], ['a#3']]);
  assert.deepEqual(await Promise.all(all), ['x', 'a#1', 'a#2', 'b', 'c', 'd', 'a#3'].map((i) => `done ${i}`));
});

test('a failed statement fails its own items only; the next statement still runs, and lanes bound what is in flight', async () => {
  const { calls, run } = heldStatement();
  const batcher = new StatementBatcher(run, { lanes: 2, maxItems: 10, key });
  const first = batcher.submit('a');
  const second = batcher.submit('b');
  const third = batcher.submit('c');
  const fourth = batcher.submit('d');
  assert.deepEqual(calls.map((c) => c.items), [['a'], ['b']], 'two lanes: two statements in flight, the rest waits');
  calls[0].fail(new Error('connection lost'));
  await assert.rejects(first, /connection lost/);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(calls[2].items, ['c', 'd']);
  calls[1].answer();
  calls[2].answer();
  assert.deepEqual(await Promise.all([second, third, fourth]), ['done b', 'done c', 'done d']);
});

test('a statement that throws before it starts fails its items, not the batcher', async () => {
  let calls = 0;
  const batcher = new StatementBatcher<string, string>(
    (items) => {
      calls++;
      if (items.includes('bad')) throw new Error('cannot build the statement');
      return Promise.resolve(items.map((i) => `done ${i}`));
    },
    { lanes: 1, maxItems: 10, key },
  );
  await assert.rejects(batcher.submit('bad'), /cannot build/);
  assert.equal(await batcher.submit('ok'), 'done ok');
  assert.equal(calls, 2);
});

test('with two lanes, an item waits while an item of its key is in flight in the other, and keeps its order', async () => {
  const { calls, run } = heldStatement();
  const batcher = new StatementBatcher(run, { lanes: 2, maxItems: 10, key });
  const all = ['a#1', 'a#2', 'b', 'a#3'].map((i) => batcher.submit(i));
  assert.deepEqual(calls.map((c) => c.items), [['a#1'], ['b']], 'a#2 does not run beside a#1');
  calls[1].answer();
  await new Promise((r) => setImmediate(r));
  assert.equal(calls.length, 2, 'the free lane has nothing it may run');
  calls[0].answer();
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(calls[2].items, ['a#2']);
  calls[2].answer();
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(calls[3].items, ['a#3']);
  calls[3].answer();
  assert.deepEqual(await Promise.all(all), ['a#1', 'a#2', 'b', 'a#3'].map((i) => `done ${i}`));
});

test('with gatherTurn, the items of one turn share a statement even with lanes free; a lone item goes at the end of its turn', async () => {
  const { calls, run } = heldStatement();
  const sizes: number[] = [];
  const batcher = new StatementBatcher(run, { lanes: 2, maxItems: 10, key, gatherTurn: true, onBatch: (n) => sizes.push(n) });
  const burst = ['a', 'b', 'c'].map((i) => batcher.submit(i));
  assert.equal(calls.length, 0, 'nothing goes before the turn ends');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(calls.map((c) => c.items), [['a', 'b', 'c']], 'one statement for the turn, not a, b and then c, d');
  const lone = batcher.submit('d');
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(calls[1].items, ['d'], 'the other lane takes the next turn');
  // both lanes busy: an item waits for a lane, and goes once one frees, with what queued meanwhile
  const waiting = ['e', 'f'].map((i) => batcher.submit(i));
  await new Promise((r) => setImmediate(r));
  assert.equal(calls.length, 2);
  calls[0].answer();
  assert.deepEqual(await Promise.all(burst), ['done a', 'done b', 'done c']);
  await new Promise((r) => setImmediate(r));
  assert.deepEqual(calls[2].items, ['e', 'f']);
  calls[1].answer();
  calls[2].answer();
  assert.deepEqual(await Promise.all([lone, ...waiting]), ['done d', 'done e', 'done f']);
  assert.deepEqual(sizes, [3, 1, 2]);
});
