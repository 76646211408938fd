/**
 * The labels a graph intake has met, each with the taskId it was given, held as bytes instead of JavaScript
 * strings and a Map: a label is its ASCII bytes in one buffer, its taskId 22 bytes in another, and a label finds its
 * index through an open-addressing hash table of Int32. For a 300,000-task graph this is ~16 MB where strings, a
 * Map and an array of taskIds took ~45 MB of the intake's 61 MB (live heap after GC), and what the API keeps
 * while a graph streams in is what decides its peak memory.
 *
 * Labels are ASCII by construction (LABEL_PATTERN: the intake checks every name before it gets here), so a byte
 * is a character and byte order is JavaScript's string order.
 */
const TASK_ID_BYTES = 22;

export class LabelTable {
  private bytes: Buffer;
  private used = 0;
  /** starts[i] is where label i begins; starts[size] is where the next one will */
  private starts: Int32Array;
  private taskIds: Buffer;
  /** index + 1 of the label in each bucket, 0 for an empty one; kept at most half full */
  private buckets: Int32Array;
  size = 0;

  /** `room`: the labels it has room for before it first grows (a power of two). */
  constructor(room = 1024) {
    this.bytes = Buffer.alloc(room * 16);
    this.starts = new Int32Array(room + 1);
    this.taskIds = Buffer.alloc(room * TASK_ID_BYTES);
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
    for (let i = 0; i < label.length; i++) {
      if (label.charCodeAt(i) > 0x7e) throw new Error(`LabelTable holds ASCII labels only, not ${JSON.stringify(label)}`);
    }
    const index = this.size;
    if (index + 2 > this.starts.length) this.starts = grown(this.starts, this.starts.length * 2);
    if ((index + 1) * TASK_ID_BYTES > this.taskIds.length) this.taskIds = grownBuffer(this.taskIds, this.taskIds.length * 2);
    if (this.used + label.length > this.bytes.length) this.bytes = grownBuffer(this.bytes, Math.max(this.bytes.length * 2, this.used + label.length));
    this.bytes.write(label, this.used, 'latin1');
    this.used += label.length;
    this.size++;
    this.starts[this.size] = this.used;
    if (this.size * 2 > this.buckets.length) this.rehash(this.buckets.length * 2);
    else this.place(index, hashOf(label));
    return index;
  }

  label(index: number): string {
    return this.bytes.toString('latin1', this.starts[index], this.starts[index + 1]);
  }

  /** The taskId given to the label, or '' before one is. */
  taskId(index: number): string {
    const at = index * TASK_ID_BYTES;
    return this.taskIds[at] === 0 ? '' : this.taskIds.toString('latin1', at, at + TASK_ID_BYTES);
  }

  setTaskId(index: number, taskId: string): void {
    if (taskId.length !== TASK_ID_BYTES) throw new Error(`a taskId is ${TASK_ID_BYTES} characters, not ${JSON.stringify(taskId)}`);
    this.taskIds.write(taskId, index * TASK_ID_BYTES, 'latin1');
  }

  /** Orders two labels as JavaScript's `<` orders their strings, without making the strings. */
  compare(a: number, b: number): number {
    const aStart = this.starts[a];
    const aLength = this.starts[a + 1] - aStart;
    const bStart = this.starts[b];
    const bLength = this.starts[b + 1] - bStart;
    const n = Math.min(aLength, bLength);
    for (let i = 0; i < n; i++) {
      const d = this.bytes[aStart + i] - this.bytes[bStart + i];
      if (d !== 0) return d;
    }
    return aLength - bLength;
  }

  private equals(index: number, label: string): boolean {
    const start = this.starts[index];
    if (this.starts[index + 1] - start !== label.length) return false;
    for (let i = 0; i < label.length; i++) if (this.bytes[start + i] !== label.charCodeAt(i)) return false;
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
    for (let i = 0; i < this.size; i++) this.place(i, hashOfBytes(this.bytes, this.starts[i], this.starts[i + 1]));
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

function grown(array: Int32Array, length: number): Int32Array {
  const next = new Int32Array(length);
  next.set(array);
  return next;
}

function grownBuffer(buffer: Buffer, length: number): Buffer {
  const next = Buffer.alloc(length);
  buffer.copy(next);
  return next;
}
