import { test } from 'node:test';
import assert from 'node:assert/strict';
import fc from 'fast-check';
import { bytesToBase64, int16ToBase64, packNodes, unpackNodes, type NodeArrays } from '../../src/workflows/codec.js';
import { GraphModel } from '../../src/workflows/graphModel.js';
import type { CarriedState } from '../../src/workflows/contract.js';
import { fuzzParameters } from '../helpers/fuzz.js';

const rest = { manualReruns: [], canceled: false, publishedState: null, messageSeq: {}, runs: 1, rejected: [] } satisfies Partial<CarriedState>;

const arraysOf = (nodes: { state: number; reset: number; rerunsLeft: number; lastRun: number }[]): NodeArrays => ({
  states: Uint8Array.from(nodes.map((n) => n.state)),
  reset: Uint8Array.from(nodes.map((n) => n.reset)),
  rerunsLeft: Int16Array.from(nodes.map((n) => n.rerunsLeft)),
  lastRun: Int16Array.from(nodes.map((n) => n.lastRun)),
});

test('carried node arrays (version 2) come back exactly, whatever their values, through JSON', () => {
  const node = fc.record({
    state: fc.integer({ min: 0, max: 127 }),
    reset: fc.integer({ min: 0, max: 1 }),
    // mostly in the byte range, sometimes far outside it (the exceptions list)
    rerunsLeft: fc.oneof(fc.integer({ min: -1, max: 253 }), fc.integer({ min: -32768, max: 32767 })),
    lastRun: fc.oneof(fc.integer({ min: -1, max: 253 }), fc.integer({ min: -32768, max: 32767 })),
  });
  fc.assert(
    fc.property(fc.array(node, { maxLength: 300 }), (nodes) => {
      const arrays = arraysOf(nodes);
      const carried = JSON.parse(JSON.stringify({ nodeCount: nodes.length, ...packNodes(arrays, nodes.length) })) as { nodeCount: number; nodes: string; exceptions: number[] };
      assert.deepEqual(unpackNodes(carried.nodes, carried.exceptions, carried.nodeCount), arrays);
    }),
    fuzzParameters(300),
  );
});

test('a version-1 carried state (four base64 arrays) still decodes', () => {
  const arrays = arraysOf([
    { state: 3, reset: 0, rerunsLeft: 2, lastRun: 0 },
    { state: 6, reset: 1, rerunsLeft: 0, lastRun: 300 },
    { state: 0, reset: 0, rerunsLeft: -5, lastRun: -1 },
  ]);
  const v1: CarriedState = {
    nodeCount: 3,
    states: bytesToBase64(arrays.states),
    rerunsLeft: int16ToBase64(arrays.rerunsLeft),
    lastRun: int16ToBase64(arrays.lastRun),
    reset: bytesToBase64(arrays.reset),
    ...rest,
  };
  assert.deepEqual(GraphModel.decodeCarried(v1), arrays);
  const v2: CarriedState = { nodeCount: 3, ...(({ nodes, exceptions }) => ({ nodes, nodeExceptions: exceptions }))(packNodes(arrays, 3)), ...rest };
  assert.deepEqual(GraphModel.decodeCarried(v2), arrays);
});

test('450,000 nodes with any in-range values carry in under 2 MB; a uniform 300,000-node graph in 1.2 MB', () => {
  const size = 450_000;
  const arrays: NodeArrays = { states: new Uint8Array(size), reset: new Uint8Array(size), rerunsLeft: new Int16Array(size), lastRun: new Int16Array(size) };
  for (let i = 0; i < size; i++) {
    arrays.states[i] = (i * 7) % 9;
    arrays.reset[i] = i % 2;
    arrays.rerunsLeft[i] = (i * 13) % 101;
    arrays.lastRun[i] = ((i * 17) % 51) - 1;
  }
  const packed = packNodes(arrays, size);
  const bytes = JSON.stringify({ nodeCount: size, nodes: packed.nodes, nodeExceptions: packed.exceptions, ...rest }).length;
  assert.ok(bytes < 2_000_000, `${bytes} bytes`);
  const uniform = packNodes({ states: new Uint8Array(300_000), reset: new Uint8Array(300_000), rerunsLeft: new Int16Array(300_000), lastRun: new Int16Array(300_000).fill(-1) }, 300_000);
  assert.equal(uniform.nodes.length, 1_200_000);
  assert.deepEqual(uniform.exceptions, []);
});
