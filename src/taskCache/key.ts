import { createHash } from 'node:crypto';
import { canonicalDigest } from '../canonicalJson.js';

/**
 * A cached node's key (docs/formats.md § Cached tasks): computed by tgs from what the task does, never taken from
 * the caller. The inputs are the cache `name` and `digestData`, the task's `taskQueueId`, its `payload` with every
 * `$subs` of another label replaced by `{"$subs": "cache-key:<that label's key>"}` (a dependency's taskId is fresh in every graph, so it would
 * make every key unique), its sorted `scopes`, and the sorted keys of the nodes it requires. A change anywhere
 * upstream changes a dependency's key, so it changes every key downstream. Not part of the key: deadline, expires,
 * priority, metadata, tags, routes, extra (they say when and how visibly the work runs, not what it computes).
 */
export interface CacheKeyInputs {
  name: string;
  digestData: unknown;
  taskQueueId: string;
  payload: unknown;
  scopes: string[];
  requires: string[];
}

/**
 * Versioned: a change of what goes into a key changes the version, so old entries can never match a new key. v2: a
 * dependency's key in a payload is `{"$subs": "cache-key:<key>"}`, which no payload can hold, instead of the string
 * `cache-key:<key>`, which one could (so v1 entries, which a literal may have poisoned, are never found again).
 */
export const CACHE_KEY_VERSION = 'tgs-cache-key-v2';

/** The key: hex sha256 of the version and the inputs' canonical JSON (keys sorted). 64 characters. */
export function cacheKey(inputs: CacheKeyInputs): string {
  return createHash('sha256').update(CACHE_KEY_VERSION).update(canonicalDigest(inputs)).digest('hex');
}

/** The inputs in their canonical order: scopes and requires sorted. */
export function keyInputs(raw: CacheKeyInputs): CacheKeyInputs {
  return { ...raw, scopes: [...raw.scopes].sort(), requires: [...raw.requires].sort() };
}

/** The inputs that differ between two keys' inputs, in the order they are listed above. */
export function differingInputs(a: CacheKeyInputs, b: CacheKeyInputs): (keyof CacheKeyInputs)[] {
  const names: (keyof CacheKeyInputs)[] = ['name', 'digestData', 'taskQueueId', 'payload', 'scopes', 'requires'];
  return names.filter((n) => !canonicalDigest(a[n] ?? null).equals(canonicalDigest(b[n] ?? null)));
}

/**
 * Where in a payload two differ, as JSON pointers (at most `limit`): what `why` prints when the payload is the
 * input that changed, so a one-byte change is found in a large payload.
 */
export function differingPaths(a: unknown, b: unknown, limit = 10, at = ''): string[] {
  if (canonicalDigest(a ?? null).equals(canonicalDigest(b ?? null))) return [];
  const bothObjects = a !== null && b !== null && typeof a === 'object' && typeof b === 'object' && Array.isArray(a) === Array.isArray(b);
  if (!bothObjects) return [at || '/'];
  const keys = [...new Set([...Object.keys(a as object), ...Object.keys(b as object)])].sort();
  const out: string[] = [];
  for (const k of keys) {
    if (out.length >= limit) break;
    const path = `${at}/${k.replace(/~/g, '~0').replace(/\//g, '~1')}`;
    out.push(...differingPaths((a as Record<string, unknown>)[k], (b as Record<string, unknown>)[k], limit - out.length, path));
  }
  return out;
}
