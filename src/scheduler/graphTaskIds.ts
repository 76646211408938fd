import { randomFillSync } from 'node:crypto';

/** Random bytes drawn 4 KiB at a time: one call to the system's generator for 256 taskIds instead of one each. */
const POOL_BYTES = 4096;

/**
 * The taskIds of one submit's new tasks: slugids in Taskcluster's form (a version-4 UUID in base64url, its first bit
 * clear: what slugid.nice() makes, and what the taskId pattern of the task schema admits) whose first six bytes are
 * shared by the whole submit and whose other 74 free bits are random. Every index keyed by taskId (tasks, graph_nodes,
 * task_dependencies both ways, the outbox's deferred lane) then takes a submit's rows into one narrow range of its
 * pages instead of all over the index: fewer pages touched, fewer of them written whole to the WAL after a checkpoint.
 * A 100,000-task submit into a database holding one already (bench/submitCpu.ts 100, alternated runs) wrote 3.95-3.96
 * KB of WAL a task instead of 4.41-4.44, at 0.085-0.086 ms of Postgres CPU a task instead of 0.089-0.097.
 * The prefix tells nobody anything they could use: a taskId grants nothing, and the rest of each is random.
 */
export function graphTaskIds(): () => string {
  let pool = Buffer.alloc(0);
  let at = 0;
  const take = (n: number) => {
    if (at + n > pool.length) {
      pool = randomFillSync(Buffer.allocUnsafe(POOL_BYTES));
      at = 0;
    }
    at += n;
    return pool.subarray(at - n, at);
  };
  const prefix = Buffer.from(take(6));
  prefix[0] &= 0x7f;
  return () => {
    const bytes = Buffer.allocUnsafe(16);
    prefix.copy(bytes, 0);
    take(10).copy(bytes, 6);
    bytes[6] = (bytes[6] & 0x0f) | 0x40; // version 4
    bytes[8] = (bytes[8] & 0x3f) | 0x80; // RFC 4122 variant
    return bytes.toString('base64url');
  };
}
