// Per-node marker bits: one byte per node, uploaded to the GPU as is (see shaders.ts, which is generated from
// these values).
export const FLAG_SELECTED = 1;
export const FLAG_BLOCKING = 2;
export const FLAG_HELD_BACK = 4;
export const FLAG_DIM = 8;
/** the latest run was reused from the cache (docs/formats.md § Cached tasks): a white ring inside the node */
export const FLAG_CACHED = 16;
/**
 * Bits 5-7: what an amend did to the node (src/ui/graph/amendMarks.ts, its code 0-6), each drawn as a ring of its own
 * colour and style.
 */
export const AMEND_SHIFT = 5;
export const AMEND_BITS = 7 << AMEND_SHIFT;
