import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { LabelTable } from '../../src/scheduler/labelTable.js';

// The table the graph intake keeps labels and taskIds in, held to a Map and an array doing the same job.
const labelChars = fc.constantFrom(...'abcXYZ019_./:@+-');
const label = fc.string({ unit: labelChars, minLength: 1, maxLength: 12 });
const taskId = fc.stringMatching(/^[A-Za-z0-9_-]{22}$/);

test('labels, their indexes, taskIds and order are what a Map and string comparison give, through every growth', () => {
  fc.assert(
    fc.property(fc.array(fc.tuple(label, fc.option(taskId, { nil: undefined })), { maxLength: 3000 }), (mentions) => {
      const table = new LabelTable(4);
      const model = new Map<string, number>();
      const ids: string[] = [];
      for (const [name, id] of mentions) {
        let index = table.indexOf(name);
        assert.equal(index, model.get(name) ?? -1);
        if (index < 0) {
          index = table.add(name);
          assert.equal(index, model.size);
          model.set(name, index);
          ids.push('');
        }
        if (id !== undefined && ids[index] === '') {
          table.setTaskId(index, id);
          ids[index] = id;
        }
      }
      assert.equal(table.size, model.size);
      const names = [...model.keys()];
      for (const [name, index] of model) {
        assert.equal(table.label(index), name);
        assert.equal(table.indexOf(name), index);
        assert.equal(table.taskId(index), ids[index]);
      }
      const byTable = [...model.values()].sort((a, b) => table.compare(a, b)).map((i) => table.label(i));
      assert.deepEqual(byTable, names.sort());
    }),
    { numRuns: 60 },
  );
});

// Over two letters, labels are each other's prefixes and share buckets often: what a table gets wrong comparing a
// label with one it meets on its probe path shows here.
const universe = Array.from({ length: 8 }, (_, n) => n + 1).flatMap((n) => Array.from({ length: 2 ** n }, (_, k) => k.toString(2).padStart(n, '0').replace(/0/g, 'a').replace(/1/g, 'b')));

test('among labels that are prefixes of each other, each is found only as itself, and sorts as strings do', () => {
  fc.assert(
    fc.property(fc.subarray(universe), (present) => {
      // room for 2 at first: buckets a quarter to half full, as a growing table is
      const table = new LabelTable(2);
      for (const name of present) table.add(name);
      const set = new Set(present);
      for (const name of universe) assert.equal(table.indexOf(name), set.has(name) ? present.indexOf(name) : -1, name);
      const sorted = present.map((_, i) => i).sort((a, b) => table.compare(a, b)).map((i) => table.label(i));
      assert.deepEqual(sorted, [...present].sort());
    }),
    { numRuns: 100 },
  );
});

test('a table of 50,000 labels (its hash table grown five times) finds each, and no label it lacks', () => {
  const table = new LabelTable();
  for (let i = 0; i < 50_000; i++) assert.equal(table.add(`l${i % 100}-${i}`), i);
  for (let i = 0; i < 50_000; i++) assert.equal(table.indexOf(`l${i % 100}-${i}`), i);
  assert.equal(table.indexOf('l0-50000'), -1);
  assert.equal(table.indexOf('l1-1 '), -1);
});

test('labels of 1 to 255 characters filling many 64 KiB blocks, none split between two, read back whole', () => {
  const table = new LabelTable();
  const name = (i: number) => `${'x'.repeat(i % 249)}${i}`;
  for (let i = 0; i < 50_000; i++) table.add(name(i));
  table.add('y'.repeat(255));
  for (let i = 0; i < 50_000; i++) assert.equal(table.label(i), name(i));
  assert.equal(table.label(50_000), 'y'.repeat(255));
  assert.equal(table.indexOf(name(49_999)), 49_999);
});

test('a label that is not ASCII or not 1 to 255 characters, or a taskId that is not 22, is refused rather than stored wrong', () => {
  const table = new LabelTable();
  assert.throws(() => table.add('é'), /ASCII labels only/);
  assert.throws(() => table.add('z'.repeat(256)), /1 to 255 characters/);
  assert.throws(() => table.add(''), /1 to 255 characters/);
  assert.throws(() => table.setTaskId(table.add('a'), 'short'), /22 characters/);
  assert.equal(table.taskId(0), '');
});
