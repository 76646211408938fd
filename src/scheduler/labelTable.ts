import { ByteRecords, Int32Blocks } from './blocks.js';

/**
 * The labels a graph intake has met, each with the taskId it was given, held as bytes instead of JavaScript
 * strings and a Map: a label is its length and ASCII bytes in 64 KiB blocks, its taskId 22 bytes in blocks of
 * records (src/scheduler/blocks.ts), and a label finds its index through an open-addressing hash table of Int32.
 * For a 300,000-task graph, strings, a Map and an array of taskIds were ~40 MB of JavaScript heap (live after a
 * collection); this is ~15 MB of buffers, and what the API keeps while a graph streams in counts in its peak.
 *
 * Labels are ASCII by construction (LABEL_PATTERN, at most 255 characters: the intake checks every name before it
 * gets here), so a byte is a character and byte order is JavaScript's string order.
 */
const TASK_ID_BYTES = 22;
const BLOCK_BITS = 16;
const BLOCK = 1 << BLOCK_BITS;
const MAX_LABEL = 255;

export class LabelTable {
  private readonly bytes: Buffer[] = [];
  /** where the next label goes: block << 16 | offset */
  private used = 0;
  /** where each label is: its length byte, then its bytes */
  private readonly starts = new Int32Blocks();
  private readonly taskIds = new ByteRecords(TASK_ID_BYTES);
  /** index + 1 of the label in each bucket, 0 for an empty one; kept at most half full */
  private buckets: Int32Array;
  size = 0;

  /** `room`: the labels its hash table has room for before it first grows (a power of two). */
  constructor(room = 1024) {
    this.buckets = new Int32Array(room * 2);
  }

  /** The label's index, or -1. */
  indexOf(label: string): number {
    const mask = this.buckets.length - 1;
    for (let b = hashOf(label) & mask; ; b = (b + 1) & mask) {
      const entry = this.buckets[b];
      if (entry === 0) return -1;
      if (this.equals(entry - 1, label)) return entry - 1;
    }
  }

  /** Adds a label not in the table (the caller has checked with indexOf) and returns its index. */
  add(label: string): number {
    if (label.length === 0 || label.length > MAX_LABEL) throw new Error(`LabelTable holds labels of 1 to ${MAX_LABEL} characters, not ${label.length}`);
    for (let i = 0; i < label.length; i++) {
      if (label.charCodeAt(i) > 0x7e) throw new Error(`LabelTable holds ASCII labels only, not ${JSON.stringify(label)}`);
    }
    // a label never spans two blocks
    if ((this.used & (BLOCK - 1)) + 1 + label.length > BLOCK) this.used = ((this.used >>> BLOCK_BITS) + 1) << BLOCK_BITS;
    const block = this.used >>> BLOCK_BITS;
    if (block === this.bytes.length) this.bytes.push(Buffer.alloc(BLOCK));
    const at = this.used & (BLOCK - 1);
    this.bytes[block][at] = label.length;
    this.bytes[block].write(label, at + 1, 'latin1');
    const index = this.size;
    this.starts.push(this.used);
    this.used += 1 + label.length;
    this.size++;
    if (this.size * 2 > this.buckets.length) this.rehash(this.buckets.length * 2);
    else this.place(index, hashOf(label));
    return index;
  }

  label(index: number): string {
    const start = this.starts.at(index);
    const block = this.bytes[start >>> BLOCK_BITS];
    const at = start & (BLOCK - 1);
    return block.toString('latin1', at + 1, at + 1 + block[at]);
  }

  /** The taskId given to the label, or '' before one is. */
  taskId(index: number): string {
    const block = this.taskIds.block(index);
    const at = this.taskIds.offset(index);
    return block[at] === 0 ? '' : block.toString('latin1', at, at + TASK_ID_BYTES);
  }

  setTaskId(index: number, taskId: string): void {
    if (taskId.length !== TASK_ID_BYTES) throw new Error(`a taskId is ${TASK_ID_BYTES} characters, not ${JSON.stringify(taskId)}`);
    this.taskIds.block(index).write(taskId, this.taskIds.offset(index), 'latin1');
  }

  /** Orders two labels as JavaScript's `<` orders their strings, without making the strings. */
  compare(a: number, b: number): number {
    const aStart = this.starts.at(a);
    const aBlock = this.bytes[aStart >>> BLOCK_BITS];
    const aAt = (aStart & (BLOCK - 1)) + 1;
    const bStart = this.starts.at(b);
    const bBlock = this.bytes[bStart >>> BLOCK_BITS];
    const bAt = (bStart & (BLOCK - 1)) + 1;
    const aLength = aBlock[aAt - 1];
    const bLength = bBlock[bAt - 1];
    const n = Math.min(aLength, bLength);
    for (let i = 0; i < n; i++) {
      const d = aBlock[aAt + i] - bBlock[bAt + i];
      if (d !== 0) return d;
    }
    return aLength - bLength;
  }

  private equals(index: number, label: string): boolean {
    const start = this.starts.at(index);
    const block = this.bytes[start >>> BLOCK_BITS];
    const at = (start & (BLOCK - 1)) + 1;
    if (block[at - 1] !== label.length) return false;
    for (let i = 0; i < label.length; i++) if (block[at + i] !== label.charCodeAt(i)) return false;
    return true;
  }

  private place(index: number, hash: number) {
    const mask = this.buckets.length - 1;
    let b = hash & mask;
    while (this.buckets[b] !== 0) b = (b + 1) & mask;
    this.buckets[b] = index + 1;
  }

  private rehash(bucketCount: number) {
    this.buckets = new Int32Array(bucketCount);
    for (let i = 0; i < this.size; i++) {
      const start = this.starts.at(i);
      const block = this.bytes[start >>> BLOCK_BITS];
      const at = (start & (BLOCK - 1)) + 1;
      this.place(i, hashOfBytes(block, at, at + block[at - 1]));
    }
  }
}

/** FNV-1a over the characters; for ASCII the same as hashOfBytes over the label's bytes. */
function hashOf(label: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < label.length; i++) h = Math.imul(h ^ label.charCodeAt(i), 0x01000193);
  return h >>> 0;
}

function hashOfBytes(bytes: Buffer, start: number, end: number): number {
  let h = 0x811c9dc5;
  for (let i = start; i < end; i++) h = Math.imul(h ^ bytes[i], 0x01000193);
  return h >>> 0;
}
