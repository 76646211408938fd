/**
 * Growable storage for what a graph intake keeps per label or per edge, in fixed blocks: it grows without copying
 * and without the empty half a doubled array leaves. For a 300,000-task graph (1.2 million edges) doubling had
 * 16.8 MB of edge arrays hold 9.6 MB, and 4 + 8 MB alive at once while the last one grew; what the API holds while
 * a graph streams in is what decides its peak memory.
 */
const INT_BLOCK = 1 << 16;

/** Int32 values appended one at a time. */
export class Int32Blocks {
  private readonly blocks: Int32Array[] = [];
  length = 0;

  push(value: number): void {
    const block = this.length >>> 16;
    if (block === this.blocks.length) this.blocks.push(new Int32Array(INT_BLOCK));
    this.blocks[block][this.length & (INT_BLOCK - 1)] = value;
    this.length++;
  }

  at(i: number): number {
    return this.blocks[i >>> 16][i & (INT_BLOCK - 1)];
  }
}

/** Records of `width` bytes by index, zero until written; a record never spans two blocks. */
export class ByteRecords {
  private readonly blocks: Buffer[] = [];

  constructor(
    readonly width: number,
    private readonly perBlock = 4096,
  ) {}

  /** The block holding record `i` (allocated, with every block before it, on first use). */
  block(i: number): Buffer {
    const block = Math.floor(i / this.perBlock);
    while (block >= this.blocks.length) this.blocks.push(Buffer.alloc(this.width * this.perBlock));
    return this.blocks[block];
  }

  /** Where record `i` starts in its block. */
  offset(i: number): number {
    return (i % this.perBlock) * this.width;
  }
}
