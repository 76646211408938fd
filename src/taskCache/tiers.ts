/**
 * Cache tiers (TGS_CACHE_TIERS, highest first; docs/formats.md § Cached tasks). An entry lives at the index path
 * `tgs.cache.<tier>.<name>.<key>`; writing one needs the scope of the task's route `index.tgs.cache.<tier>.…`, so a
 * deployment grants each tier to the graphs it trusts (`queue:route:index.tgs.cache.level-1.*`). A lookup searches
 * the node's own tier and the tiers above it, never below: a pull request's build may reuse main's, main never
 * reuses a pull request's (a lower tier is writable by less trusted submitters, so its entries could be poisoned).
 */

export { CACHE_WORD, parseCacheTiers } from '../config.js';

/** The index namespace every cache entry lives under. */
export const CACHE_NAMESPACE = 'tgs.cache';

/** The index path of an entry. */
export const cachePath = (tier: string, name: string, key: string) => `${CACHE_NAMESPACE}.${tier}.${name}.${key}`;

/** The tiers a node of tier `tier` searches, highest first: those at or above its own. */
export function tiersToSearch(tiers: readonly string[], tier: string): string[] {
  const at = tiers.indexOf(tier);
  return at < 0 ? [] : tiers.slice(0, at + 1);
}

/** A node without `tier` is in the lowest. */
export const defaultTier = (tiers: readonly string[]) => tiers[tiers.length - 1];
