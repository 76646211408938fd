/**
 * Cache tiers (TGS_CACHE_TIERS, highest first; docs/formats.md § Cached tasks). An entry lives at the index path
 * `tgs.cache.<tier>.<name>.<key>`; writing one needs the scope of the task's route `index.tgs.cache.<tier>.…`, so a
 * deployment grants each tier to the graphs it trusts (`queue:route:index.tgs.cache.level-1.*`). A lookup searches
 * the node's own tier and the tiers above it, never below: a pull request's build may reuse main's, main never
 * reuses a pull request's (a lower tier is writable by less trusted submitters, so its entries could be poisoned).
 */

/** A tier's or a cache name's characters: one index path part, and a routing-key word. */
export const CACHE_WORD = /^[A-Za-z0-9_-]{1,64}$/;

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

/** TGS_CACHE_TIERS: comma-separated, highest first; unset or empty: one tier, `default`. */
export function parseCacheTiers(raw: string | undefined): string[] {
  const tiers = (raw ?? '').split(',').map((t) => t.trim()).filter(Boolean);
  for (const t of tiers) {
    if (!CACHE_WORD.test(t)) throw new Error(`TGS_CACHE_TIERS must be comma-separated tier names of letters, digits, _ and - (at most 64 each), got ${JSON.stringify(t)}`);
  }
  if (new Set(tiers).size !== tiers.length) throw new Error(`TGS_CACHE_TIERS names a tier twice: ${JSON.stringify(raw)}`);
  return tiers.length > 0 ? tiers : ['default'];
}
