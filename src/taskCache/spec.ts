import { DurationError, parseDuration } from '../duration.js';
import { defaultTier } from './tiers.js';

/** `use`: look up when ready, write on a miss; `refresh`: run and overwrite the entry; `off`: neither. */
export const CACHE_MODES = ['use', 'refresh', 'off'] as const;
export type CacheMode = (typeof CACHE_MODES)[number];

/** A graph node's `cache` as submitted (graphSchema.ts checked its shape). */
export interface CacheInput {
  name: string;
  tier?: string;
  digestData?: unknown;
  maxAge?: number | string;
  mode?: CacheMode;
}

/** A node's `cache` with its defaults: the lowest tier, no age limit, `use`. */
export interface CacheSpec {
  name: string;
  tier: string;
  digestData: unknown;
  maxAgeS: number | undefined;
  mode: CacheMode;
}

/** The spec of a node's `cache`, or what is wrong with it (a tier the deployment does not have, a bad maxAge). */
export function cacheSpec(input: CacheInput, tiers: readonly string[]): CacheSpec | { errors: string[] } {
  const errors: string[] = [];
  const tier = input.tier ?? defaultTier(tiers);
  if (!tiers.includes(tier)) errors.push(`cache.tier ${JSON.stringify(tier)} is not a tier of this deployment (TGS_CACHE_TIERS: ${tiers.join(', ')})`);
  let maxAgeS: number | undefined;
  if (typeof input.maxAge === 'number') maxAgeS = input.maxAge;
  else if (typeof input.maxAge === 'string') {
    try {
      const ms = parseDuration(input.maxAge);
      if (ms < 0) errors.push('cache.maxAge must not be negative');
      else maxAgeS = Math.floor(ms / 1000);
    } catch (err) {
      if (!(err instanceof DurationError)) throw err;
      errors.push(`cache.maxAge ${JSON.stringify(input.maxAge.slice(0, 100))}: write seconds, or a duration such as "7 days" or "12 hours"`);
    }
  }
  if (maxAgeS !== undefined && maxAgeS > 2 ** 31 - 1) errors.push('cache.maxAge is more than 68 years: leave it out for no limit');
  if (errors.length > 0) return { errors };
  return { name: input.name, tier, digestData: input.digestData ?? null, maxAgeS, mode: input.mode ?? 'use' };
}

/** A node's mode under its graph's `cacheMode`, which can only turn caching down: off stays off, use may become refresh or off. */
export function effectiveMode(own: CacheMode, graphMode: CacheMode): CacheMode {
  return graphMode === 'off' || own === 'off' ? 'off' : graphMode === 'refresh' ? 'refresh' : own;
}
