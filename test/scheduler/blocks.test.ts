import { test } from 'node:test';
import assert from 'node:assert/strict';
import { ByteRecords, Int32Blocks } from '../../src/scheduler/blocks.js';

test('Int32Blocks reads back every value pushed, across block boundaries', () => {
  const list = new Int32Blocks();
  for (let i = 0; i < 200_000; i++) list.push(i * 7 - 100_000);
  assert.equal(list.length, 200_000);
  for (const i of [0, 65_535, 65_536, 131_071, 131_072, 199_999]) assert.equal(list.at(i), i * 7 - 100_000);
});

test('ByteRecords: a record written at any index is read back there, zero where none was written', () => {
  const records = new ByteRecords(32, 16);
  for (const i of [0, 15, 16, 100, 1000]) Buffer.alloc(32, i % 251 + 1).copy(records.block(i), records.offset(i));
  for (const i of [0, 15, 16, 100, 1000]) assert.ok(records.block(i).subarray(records.offset(i), records.offset(i) + 32).every((b) => b === i % 251 + 1), `record ${i}`);
  for (const i of [1, 17, 999]) assert.ok(records.block(i).subarray(records.offset(i), records.offset(i) + 32).every((b) => b === 0), `record ${i}`);
});
