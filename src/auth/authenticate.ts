import { timingSafeEqual } from 'node:crypto';
import hawk from 'hawk';
import { TgsError } from '../errors.js';
import type { ClientRecord, ClientStore, ExtContent } from './types.js';
import { isPostgresUnavailable } from '../db/unavailable.js';
import { ISSUER_CLIENT_ID } from './clients.js';
import { CertificateCache, type VerifiedCertificate } from './certificateCache.js';
import { NonceCache } from './nonceCache.js';
import { scopeSatisfied } from './scopes.js';
export type { ClientRecord, ClientStore, ExtContent } from './types.js';
import { certificateSignature, temporaryAccessToken, type Certificate } from './temporaryCredentials.js';

export interface AuthContext {
  /** undefined for a request without credentials, which holds what the `anonymous` role grants (refused with 403, as a client). */
  clientId: string | undefined;
  scopes: string[];
  /**
   * When the credentials stop authenticating (ms since the epoch): the client's expiry, or a certificate's (with
   * the 5 minutes of clock drift it is allowed) and its issuer's; undefined when they do not expire. A connection that outlives its request (the worker
   * stream) ends by then.
   */
  validUntil?: number;
}

export interface RequestForAuth {
  method: string;
  /** Path and query as received, e.g. `/api/queue/v1/task/abc?bewit=...`. */
  url: string;
  /** The Host header: used only when the root URL is a loopback address (see `signedHosts`). */
  host: string;
  authorization: string | undefined;
  contentType: string;
  /**
   * The host and port the request was sent to, when the caller knows them (authenticateHawk: a request another
   * service received); otherwise those of the root URL (see `signedHosts`).
   */
  signedFor?: { host: string; port: number };
}

/**
 * A request whose Authorization header (or bewit) checked out, before its body was read. The body is
 * checked against the header's payload hash (when the client sent one) by `verifyPayload` once it is read.
 */
export interface Authenticated {
  auth: AuthContext;
  verifyPayload(rawBody: string | undefined): void;
  /**
   * The same check for a body read as a stream: feed it every chunk, then `verify()` once the body has ended
   * (before anything it caused is committed). Undefined when the client sent no payload hash.
   */
  payloadHasher(): PayloadHasher | undefined;
  /** The payload hash the Authorization header carries, when it carries one (authenticateHawk answers it). */
  payloadHash?: string;
}

export interface PayloadHasher {
  update(chunk: Uint8Array): void;
  verify(): void;
}

const payloadMismatch = () => authFailed('Hawk authentication failed: the body does not match the payload hash of the Authorization header');

// Taskcluster accepts requests whose timestamp is within 15 minutes of the server's clock.
export const TIMESTAMP_SKEW_SECONDS = 15 * 60;
// A certificate may start up to 5 minutes in the future (clock drift between issuer and server).
const CERTIFICATE_DRIFT_MS = 5 * 60 * 1000;
const MAX_CERTIFICATE_LIFETIME_MS = 31 * 24 * 60 * 60 * 1000;

const authFailed = (message: string) => new TgsError('AuthenticationFailed', message);

function parseExt(ext: string | undefined): ExtContent {
  if (!ext) return {};
  try {
    const parsed: unknown = JSON.parse(Buffer.from(ext, 'base64').toString('utf8'));
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('not an object');
    return parsed as ExtContent;
  } catch {
    throw authFailed('Failed to parse ext: it must be base64-encoded JSON with `certificate` and/or `authorizedScopes`');
  }
}

function isStringArray(value: unknown): value is string[] {
  return Array.isArray(value) && value.every((v) => typeof v === 'string');
}

function parseCertificate(raw: Certificate | string): Certificate {
  let cert: unknown = raw;
  if (typeof raw === 'string') {
    try {
      cert = JSON.parse(raw);
    } catch {
      throw authFailed('ext.certificate is not valid JSON');
    }
  }
  const c = cert as Partial<Certificate>;
  if (
    typeof c !== 'object' || c === null || c.version !== 1 || !isStringArray(c.scopes) ||
    typeof c.start !== 'number' || typeof c.expiry !== 'number' || typeof c.seed !== 'string' ||
    typeof c.signature !== 'string' || (c.issuer !== undefined && typeof c.issuer !== 'string')
  ) {
    throw authFailed('ext.certificate must have version 1, scopes, start, expiry, seed and signature');
  }
  return c as Certificate;
}

interface Resolved {
  key: string;
  scopes: string[];
  /** AuthContext.validUntil */
  validUntil?: number;
  /** For a certificate: what it was verified against, to be cached once the request's MAC checks out. */
  verified?: Omit<VerifiedCertificate, 'ext'>;
}

function usable(client: ClientRecord | undefined, what: string, now: number): ClientRecord {
  if (!client) throw authFailed(`${what} is not a known client`);
  if (client.expires instanceof Date && client.expires.getTime() < now) throw authFailed(`${what} has expired`);
  if (client.disabled) throw authFailed(`${what} is disabled`);
  return client;
}

function checkValidityPeriod(start: number, expiry: number, now: number): void {
  if (start > now + CERTIFICATE_DRIFT_MS) throw authFailed('ext.certificate.start is in the future');
  if (expiry < now - CERTIFICATE_DRIFT_MS) throw authFailed('ext.certificate has expired');
}

/** Resolves the key a request was signed with and the scopes it carries (before authorizedScopes). */
async function resolveCredentials(store: ClientStore, id: string, ext: ExtContent): Promise<Resolved> {
  const now = Date.now();
  // The issuer's token signs temporary credentials and artifact URLs; a leak of one request signed with it would be a
  // leak of everything, so it never authenticates a request: not bare, and not as an unnamed certificate it signed
  // for itself (only the named credentials it issues, task-client/…, do).
  if (id === ISSUER_CLIENT_ID) throw authFailed(`${ISSUER_CLIENT_ID} only issues credentials: it cannot authenticate requests itself`);
  if (!ext.certificate) {
    const client = usable(await store.get(id), `clientId ${id}`, now);
    return { key: client.accessToken, scopes: client.scopes, validUntil: client.expires?.getTime() };
  }
  const cert = parseCertificate(ext.certificate);
  if (cert.issuer !== undefined && cert.issuer === id) throw authFailed('a certificate issuer must differ from its clientId');
  const issuerId = cert.issuer ?? id;
  const issuer = usable(await store.get(issuerId), `certificate issuer ${issuerId}`, now);
  if (!sameSecret(certificateSignature(issuer.accessToken, cert, id), cert.signature)) {
    throw authFailed('ext.certificate has an invalid signature');
  }
  checkValidityPeriod(cert.start, cert.expiry, now);
  if (cert.expiry - cert.start > MAX_CERTIFICATE_LIFETIME_MS) throw authFailed('ext.certificate lives longer than 31 days');
  const missing = cert.scopes.filter((s) => !scopeSatisfied(issuer.scopes, s));
  if (missing.length > 0) throw authFailed(`certificate issuer ${issuerId} lacks scopes it granted: ${missing.join(', ')}`);
  if (cert.issuer !== undefined && !scopeSatisfied(issuer.scopes, `auth:create-client:${id}`)) {
    throw authFailed(`certificate issuer ${issuerId} lacks auth:create-client:${id}`);
  }
  const key = temporaryAccessToken(issuer.accessToken, cert.seed);
  return {
    key,
    scopes: cert.scopes,
    validUntil: certificateValidUntil(cert.expiry, issuer.expires),
    verified: { issuerId, start: cert.start, expiry: cert.expiry, key, scopes: cert.scopes, issuerAccessToken: issuer.accessToken, issuerScopes: issuer.scopes },
  };
}

const sameList = (a: readonly string[], b: readonly string[]) => a === b || (a.length === b.length && a.every((s, i) => s === b[i]));

/**
 * A cached certificate: the issuer's state and the clock are checked as on a miss; undefined when the issuer
 * record is no longer the one the entry was verified against (another token or other expanded scopes), so the
 * certificate is verified afresh against the current one.
 */
async function resolveVerified(store: ClientStore, entry: VerifiedCertificate): Promise<Resolved | undefined> {
  const now = Date.now();
  const issuer = usable(await store.get(entry.issuerId), `certificate issuer ${entry.issuerId}`, now);
  // Both tokens are the server's own (neither comes from the request), so a plain comparison leaks nothing.
  if (issuer.accessToken !== entry.issuerAccessToken || !sameList(issuer.scopes, entry.issuerScopes)) return undefined;
  checkValidityPeriod(entry.start, entry.expiry, now);
  return { key: entry.key, scopes: entry.scopes, validUntil: certificateValidUntil(entry.expiry, issuer.expires) };
}

/** Until when a certificate authenticates (its expiry, with the clocks' drift allowed), or its issuer's expiry when that comes first. */
const certificateValidUntil = (expiry: number, issuerExpires: Date | undefined) => Math.min(expiry + CERTIFICATE_DRIFT_MS, issuerExpires?.getTime() ?? Infinity);

function applyAuthorizedScopes(scopes: string[], ext: ExtContent): string[] {
  if (ext.authorizedScopes === undefined) return scopes;
  if (!isStringArray(ext.authorizedScopes)) throw authFailed('ext.authorizedScopes must be an array of strings');
  const over = ext.authorizedScopes.filter((s) => !scopeSatisfied(scopes, s));
  if (over.length > 0) throw authFailed(`ext.authorizedScopes oversteps your scopes: ${over.join(', ')}`);
  return ext.authorizedScopes;
}

/** Constant-time comparison of two secrets (or MACs); different lengths never match. */
export function sameSecret(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

function bewitOf(url: string): string | undefined {
  const match = /[?&]bewit=([^&]+)/.exec(url);
  if (!match) return undefined;
  try {
    return decodeURIComponent(match[1]);
  } catch {
    throw new TgsError('InputError', 'The bewit query parameter has an invalid %-escape');
  }
}

const LOOPBACK = /^(127\.[0-9.]+|localhost|\[::1\])$/;

/**
 * The host and port a request must have been signed for. They come from the root URL, what clients are told
 * to use: behind a TLS proxy the client signs `tgs.example.com:443` while the API sees another Host and port.
 * When the root URL is a loopback address (development, tests) the Host header is tried as well, so a client
 * that reached the API as `localhost` or `127.0.0.1` still authenticates; a deployment with a public root URL
 * never trusts the Host header.
 */
function signedHosts(rootUrl: string, hostHeader: string): Array<[string, number]> {
  const root = new URL(rootUrl);
  const rootPort = root.port ? Number(root.port) : root.protocol === 'https:' ? 443 : 80;
  const hosts: Array<[string, number]> = [[root.hostname, rootPort]];
  if (LOOPBACK.test(root.hostname)) {
    const match = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(hostHeader);
    if (match && LOOPBACK.test(match[1])) {
      const port = match[2] ? Number(match[2]) : 80;
      if (match[1] !== root.hostname || port !== rootPort) hosts.push([match[1], port]);
    }
  }
  return hosts;
}

export interface AuthenticatorOptions {
  /** The deployment's root URL (read on every request: tests learn their port after listening). */
  rootUrl: () => string;
  nonces?: NonceCache;
  /**
   * Turns scopes into what they grant (roles, src/auth/roleStore.ts); the store's clients come already
   * expanded, so a certificate's issuer is checked against its expanded scopes. Anonymous callers hold what
   * the `anonymous` role grants.
   */
  expand?: (scopes: string[]) => Promise<string[]>;
  /** Certificates that verified (one per authenticator unless given). */
  certificates?: CertificateCache;
}

export function createAuthenticator(store: ClientStore, options: AuthenticatorOptions) {
  const nonces = options.nonces ?? new NonceCache(TIMESTAMP_SKEW_SECONDS);
  const expand = options.expand ?? (async (scopes: string[]) => scopes);
  const certificates = options.certificates ?? new CertificateCache();
  const resolve = async (id: string, rawExt: string | undefined): Promise<{ ext: ExtContent; resolved: Resolved }> => {
    const entry = rawExt ? certificates.get(id, rawExt) : undefined;
    if (entry) {
      const resolved = await resolveVerified(store, entry);
      if (resolved) return { ext: entry.ext, resolved };
      certificates.delete(id, rawExt as string);
    }
    const ext = parseExt(rawExt);
    return { ext, resolved: await resolveCredentials(store, id, ext) };
  };
  return async function authenticate(req: RequestForAuth): Promise<Authenticated> {
    const bewit = bewitOf(req.url);
    if (!req.authorization && !bewit) return { auth: { clientId: undefined, scopes: await expand([]) }, verifyPayload: () => undefined, payloadHasher: () => undefined };
    let id: string | undefined;
    let rawExt: string | undefined;
    let ext: ExtContent;
    let resolved: Resolved;
    let verifyPayload: Authenticated['verifyPayload'] = () => undefined;
    let payloadHasher: Authenticated['payloadHasher'] = () => undefined;
    let payloadHash: string | undefined;
    const hosts = req.signedFor ? [[req.signedFor.host, req.signedFor.port] as [string, number]] : signedHosts(options.rootUrl(), req.host);
    try {
      if (req.authorization) {
        const attributes = hawk.utils.parseAuthorizationHeader(req.authorization);
        id = attributes.id;
        if (!id) throw authFailed('the Hawk header has no id');
        rawExt = attributes.ext;
        ({ ext, resolved } = await resolve(id, rawExt));
        const credentialsFunc = () => ({ id: id as string, key: resolved.key, algorithm: 'sha256' as const });
        const { credentials, artifacts } = await tryHosts(hosts, ([host, port]) =>
          hawk.server.authenticate({ ...req, host, port }, credentialsFunc, {
            timestampSkewSec: TIMESTAMP_SKEW_SECONDS,
            nonceFunc: (key, nonce, ts) => nonces.check(key, nonce, ts),
          }),
        );
        if (artifacts.hash) {
          payloadHash = artifacts.hash;
          verifyPayload = (rawBody) => {
            try {
              hawk.server.authenticatePayload(rawBody ?? '', credentials, artifacts, req.contentType);
            } catch {
              throw payloadMismatch();
            }
          };
          const claimed = Buffer.from(artifacts.hash);
          payloadHasher = () => {
            const hash = hawk.crypto.initializePayloadHash('sha256', req.contentType);
            return {
              update: (chunk) => hash.update(chunk),
              verify: () => {
                const computed = Buffer.from(hawk.crypto.finalizePayloadHash(hash));
                if (computed.length !== claimed.length || !timingSafeEqual(computed, claimed)) throw payloadMismatch();
              },
            };
          };
        }
      } else {
        const [bewitId, , , bewitExt] = Buffer.from(bewit as string, 'base64url').toString('utf8').split('\\');
        id = bewitId;
        if (!id) throw authFailed('the bewit has no id');
        rawExt = bewitExt;
        ({ ext, resolved } = await resolve(id, rawExt));
        await tryHosts(hosts, ([host, port]) =>
          hawk.server.authenticateBewit({ ...req, host, port }, () => ({ id: id as string, key: resolved.key, algorithm: 'sha256' }), {
            timestampSkewSec: TIMESTAMP_SKEW_SECONDS,
          }),
        );
      }
    } catch (err) {
      if (err instanceof TgsError) throw err;
      // Looking the client up failed because the database is unavailable: not the caller's mistake, and the
      // error's text (a role name) is none of its business. The API answers it 503 (src/api/errorReply.ts).
      if (isPostgresUnavailable(err)) throw err;
      const message = (err as Error).message || 'authentication failed';
      throw authFailed(`Hawk authentication failed: ${message}. Check the clientId, accessToken and the clock.`);
    }
    // Expansion is a closure (expanding its result again adds nothing; test/auth/roles.test.ts), so only
    // authorizedScopes, a subset the request picks, needs a second one. Expanding a run's credentials again was
    // ~9 µs of CPU a report on an idle core, 8-20 µs in the API's profile under load (docs/bench-journal/2026-11-27.md).
    const expanded = await expand(resolved.scopes);
    const scopes = ext.authorizedScopes === undefined ? expanded : await expand(applyAuthorizedScopes(expanded, ext));
    // Only a certificate whose request also passed Hawk's MAC check is kept: a holder of its access token.
    if (resolved.verified && rawExt) certificates.set(id, rawExt, { ext, ...resolved.verified });
    const auth: AuthContext = resolved.validUntil === undefined ? { clientId: id, scopes } : { clientId: id, scopes, validUntil: resolved.validUntil };
    return payloadHash === undefined ? { auth, verifyPayload, payloadHasher } : { auth, verifyPayload, payloadHasher, payloadHash };
  };
}

/** The first host a signature verifies for; a MAC mismatch moves on to the next, any other failure stops. */
async function tryHosts<T>(hosts: Array<[string, number]>, verify: (host: [string, number]) => Promise<T>): Promise<T> {
  for (let i = 0; ; i++) {
    try {
      return await verify(hosts[i]);
    } catch (err) {
      if (i + 1 >= hosts.length || !/^Bad mac$/.test((err as Error).message)) throw err;
    }
  }
}
