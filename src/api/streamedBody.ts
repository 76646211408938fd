import type { Readable } from 'node:stream';
import { TgsError } from '../errors.js';
import type { PayloadHasher } from '../auth/authenticate.js';

/** The whole body over the endpoint's limit (`details.bodyLimit` set: what is left of it is not worth reading). */
export const bodyTooLarge = (limit: number) =>
  new TgsError('InputTooLarge', `The body is larger than ${limit} bytes, this endpoint's limit`, { bodyLimit: limit });

/**
 * A request body read as it arrives: refused with 413 as soon as it passes `limit` bytes, fed to the Hawk payload
 * hash when the client sent one, and checked against that hash once it has ended, so a consumer that commits
 * only after the last chunk never commits a body that does not match its signature.
 */
export class StreamedBody {
  private size = 0;
  private ended = false;
  private checked = false;

  constructor(
    private readonly stream: Readable | undefined,
    private readonly limit: number,
    private readonly hasher: PayloadHasher | undefined,
  ) {}

  private take(chunk: Buffer): void {
    this.size += chunk.length;
    if (this.size > this.limit) throw bodyTooLarge(this.limit);
    this.hasher?.update(chunk);
  }

  private verify(): void {
    this.ended = true;
    if (this.checked) return;
    this.checked = true;
    this.hasher?.verify();
  }

  /** The chunks; a consumer that stops early leaves the rest unread (not destroyed) for `settle`. */
  async *chunks(): AsyncGenerator<Buffer> {
    if (this.stream) {
      for await (const chunk of this.stream.iterator({ destroyOnReturn: false }) as AsyncIterable<Buffer>) {
        this.take(chunk);
        yield chunk;
      }
    }
    this.verify();
  }

  /**
   * After the consumer refused the body part-way: reads what the client is still sending (up to the limit, for at
   * most `ms`), so it gets the answer rather than a reset connection, and throws 401 instead of that answer
   * when the whole body turns out not to match its payload hash.
   */
  async settle(ms = 10_000): Promise<void> {
    // Ended: every chunk went through chunks() (a stream's iterator ends it only once it has handed out the last).
    if (this.stream?.readableEnded) this.ended = true;
    if (!this.ended && this.stream && !this.stream.destroyed) {
      const deadline = Date.now() + ms;
      try {
        for await (const chunk of this.stream as AsyncIterable<Buffer>) {
          this.take(chunk);
          if (Date.now() > deadline) return;
        }
      } catch {
        // over the limit, or the client went away: nothing more to learn from the body
        return;
      }
      this.ended = true;
    }
    if (this.ended) this.verify();
  }
}
