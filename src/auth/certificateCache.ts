import type { ExtContent } from './types.js';

/**
 * Temporary-credential certificates that verified, so a certificate used again skips decoding the Hawk `ext`,
 * the certificate's HMAC, the derived key's HMAC and the issuer scope check.
 *
 * An entry is keyed on the clientId and the raw `ext` text (which carries the certificate and any
 * authorizedScopes), so it only ever answers for the exact bytes that were verified. It records the issuer
 * record it was verified against: its access token and its expanded scopes. The signature and the derived key
 * are functions of the issuer's token, the certificate and the clientId only; the scope checks are functions
 * of the issuer's expanded scopes, the certificate's scopes and the clientId only. So while the issuer's token
 * and expanded scope list are both unchanged, every one of those checks would give the same answer again. The
 * client store expands the issuer's scopes through the current roles on every lookup, so a role change that
 * alters what the issuer holds alters that list too. What depends on the clock or on the issuer's state
 * (start, expiry, the issuer existing, being enabled and unexpired) is checked again on every hit.
 */
export interface VerifiedCertificate {
  /** The parsed `ext` (read-only: shared by every request that hits). */
  ext: ExtContent;
  issuerId: string;
  start: number;
  expiry: number;
  /** The temporary access token the request must be signed with. */
  key: string;
  /** The certificate's scopes. */
  scopes: string[];
  issuerAccessToken: string;
  issuerScopes: readonly string[];
}

/**
 * 10,000 entries: each claimed run gets its own certificate (and a new one per reclaim), so the working set is
 * about the runs in progress, and 10,000 covers that many concurrently reporting workers per API process.
 * An entry for a worker's run certificate (5 scopes, a 564-character ext) measured about 450 bytes of heap,
 * plus the Authorization header its key is sliced from (about 730 bytes), so the cache tops out near 12 MB.
 * Beyond the bound a miss costs what every request cost before the cache, nothing more.
 */
export const DEFAULT_CERTIFICATE_CACHE_ENTRIES = 10_000;

/** A least-recently-used map of verified certificates (a Map keeps insertion order: a hit re-inserts). */
export class CertificateCache {
  readonly stats = { hits: 0, misses: 0, evictions: 0 };
  private readonly entries = new Map<string, VerifiedCertificate>();

  constructor(readonly maxEntries = DEFAULT_CERTIFICATE_CACHE_ENTRIES) {}

  get size(): number {
    return this.entries.size;
  }

  // The length prefix keeps the key unambiguous: a bewit's clientId may hold any character.
  private static key(clientId: string, ext: string): string {
    return `${clientId.length}:${clientId}${ext}`;
  }

  get(clientId: string, ext: string): VerifiedCertificate | undefined {
    const key = CertificateCache.key(clientId, ext);
    const entry = this.entries.get(key);
    if (!entry) {
      this.stats.misses++;
      return undefined;
    }
    this.stats.hits++;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry;
  }

  set(clientId: string, ext: string, entry: VerifiedCertificate): void {
    const key = CertificateCache.key(clientId, ext);
    this.entries.delete(key);
    this.entries.set(key, entry);
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next().value as string;
      this.entries.delete(oldest);
      this.stats.evictions++;
    }
  }

  delete(clientId: string, ext: string): void {
    this.entries.delete(CertificateCache.key(clientId, ext));
  }
}
