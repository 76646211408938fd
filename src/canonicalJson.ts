import { createHash, hash, type Hash } from 'node:crypto';

/** Writes a value's canonical JSON (keys sorted, no whitespace) to `push`, a piece at a time. */
function writeCanonical(value: unknown, push: (text: string) => void): void {
  const write = (v: unknown): void => {
    if (Array.isArray(v)) {
      push('[');
      v.forEach((item, i) => {
        if (i > 0) push(',');
        // as the joined string form did: an undefined item prints nothing
        if (item !== undefined) write(item);
      });
      push(']');
    } else if (v && typeof v === 'object') {
      push('{');
      Object.keys(v)
        .sort()
        .forEach((key, i) => {
          if (i > 0) push(',');
          push(`${JSON.stringify(key)}:`);
          const field = (v as Record<string, unknown>)[key];
          // a template literal prints undefined as "undefined"
          if (field === undefined) push('undefined');
          else write(field);
        });
      push('}');
    } else {
      push(String(JSON.stringify(v)));
    }
  };
  write(value);
}

/**
 * Feeds a value's canonical JSON to a hash in 64 KB pieces instead of building it as one string: for a
 * 100,000-task graph that string was 2.6 million rope nodes and ~150 MB of heap.
 */
function hashCanonical(hash: Hash, value: unknown): void {
  let pending = '';
  writeCanonical(value, (text) => {
    pending += text;
    if (pending.length >= 65_536) {
      hash.update(pending);
      pending = '';
    }
  });
  hash.update(pending);
}

/**
 * sha256 (hex) of a whole graph's canonical JSON: the idempotency hash of graphs stored before the streamed
 * intake (their graph_hash has no `v2:` prefix). A graph submitted again over one of those is compared this way.
 */
export function graphHash(body: unknown): string {
  const hash = createHash('sha256');
  hashCanonical(hash, body);
  return hash.digest('hex');
}

/** sha256 of one value's canonical JSON: a node's part of the version-2 graph hash (src/scheduler/graphIntake.ts). */
export function canonicalDigest(value: unknown): Buffer {
  // one node is small (a task body is at most 1 MB): its JSON is built whole and hashed at once, which spares the
  // hash object a node that createHash costs
  let json = '';
  writeCanonical(value, (text) => {
    json += text;
  });
  return hash('sha256', json, 'buffer');
}
