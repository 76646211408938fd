import hawk from 'hawk';
import { TgsError } from '../errors.js';
import { scopeSatisfied } from './scopes.js';
import { certificateSignature, temporaryAccessToken, type Certificate } from './temporaryCredentials.js';

export interface ClientRecord {
  clientId: string;
  accessToken: string;
  scopes: string[];
  expires?: Date;
}

export interface ClientStore {
  get(clientId: string): Promise<ClientRecord | undefined>;
}

export interface AuthContext {
  /** undefined for an unauthenticated request, which has no scopes. */
  clientId: string | undefined;
  scopes: string[];
}

export interface RequestForAuth {
  method: string;
  /** Path and query as received, e.g. `/api/queue/v1/task/abc?bewit=...`. */
  url: string;
  host: string;
  authorization: string | undefined;
  contentType: string;
  /** The raw body, to verify a payload hash when the client sent one. */
  rawBody: string | undefined;
}

// Taskcluster accepts requests whose timestamp is within 15 minutes of the server's clock.
const TIMESTAMP_SKEW_SECONDS = 15 * 60;
// A certificate may start up to 5 minutes in the future (clock drift between issuer and server).
const CERTIFICATE_DRIFT_MS = 5 * 60 * 1000;
const MAX_CERTIFICATE_LIFETIME_MS = 31 * 24 * 60 * 60 * 1000;

const authFailed = (message: string) => new TgsError('AuthenticationFailed', message);

/**
 * Remembers nonces for the skew window so a replayed request is refused. Per process: a replay
 * sent to another API process is not caught (Taskcluster has the same property).
 */
export class NonceCache {
  private readonly seen = new Map<string, number>();
  private lastPrune = Date.now();

  check(key: string, nonce: string, ts: string): void {
    const now = Date.now();
    if (now - this.lastPrune > 60_000) this.prune(now);
    const id = `${key}\n${nonce}\n${ts}`;
    if (this.seen.has(id)) throw new Error('replayed nonce');
    this.seen.set(id, now + 2 * TIMESTAMP_SKEW_SECONDS * 1000);
  }

  private prune(now: number): void {
    this.lastPrune = now;
    for (const [id, expiry] of this.seen) if (expiry < now) this.seen.delete(id);
  }
}

interface ExtContent {
  certificate?: Certificate | string;
  authorizedScopes?: unknown;
}

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

/** Resolves the key a request was signed with and the scopes it carries (before authorizedScopes). */
async function resolveCredentials(store: ClientStore, id: string, ext: ExtContent): Promise<{ key: string; scopes: string[] }> {
  const now = Date.now();
  const usable = (client: ClientRecord | undefined, what: string): ClientRecord => {
    if (!client) throw authFailed(`${what} is not a known client`);
    if (client.expires instanceof Date && client.expires.getTime() < now) throw authFailed(`${what} has expired`);
    return client;
  };
  if (!ext.certificate) {
    const client = usable(await store.get(id), `clientId ${id}`);
    return { key: client.accessToken, scopes: client.scopes };
  }
  const cert = parseCertificate(ext.certificate);
  if (cert.issuer !== undefined && cert.issuer === id) throw authFailed('a certificate issuer must differ from its clientId');
  const issuerId = cert.issuer ?? id;
  const issuer = usable(await store.get(issuerId), `certificate issuer ${issuerId}`);
  const expected = certificateSignature(issuer.accessToken, cert, id);
  if (expected !== cert.signature) throw authFailed('ext.certificate has an invalid signature');
  if (cert.start > now + CERTIFICATE_DRIFT_MS) throw authFailed('ext.certificate.start is in the future');
  if (cert.expiry < now - CERTIFICATE_DRIFT_MS) throw authFailed('ext.certificate has expired');
  if (cert.expiry - cert.start > MAX_CERTIFICATE_LIFETIME_MS) throw authFailed('ext.certificate lives longer than 31 days');
  const missing = cert.scopes.filter((s) => !scopeSatisfied(issuer.scopes, s));
  if (missing.length > 0) throw authFailed(`certificate issuer ${issuerId} lacks scopes it granted: ${missing.join(', ')}`);
  if (cert.issuer !== undefined && !scopeSatisfied(issuer.scopes, `auth:create-client:${id}`)) {
    throw authFailed(`certificate issuer ${issuerId} lacks auth:create-client:${id}`);
  }
  return { key: temporaryAccessToken(issuer.accessToken, cert.seed), scopes: cert.scopes };
}

function applyAuthorizedScopes(scopes: string[], ext: ExtContent): string[] {
  if (ext.authorizedScopes === undefined) return scopes;
  if (!isStringArray(ext.authorizedScopes)) throw authFailed('ext.authorizedScopes must be an array of strings');
  const over = ext.authorizedScopes.filter((s) => !scopeSatisfied(scopes, s));
  if (over.length > 0) throw authFailed(`ext.authorizedScopes oversteps your scopes: ${over.join(', ')}`);
  return ext.authorizedScopes;
}

function bewitOf(url: string): string | undefined {
  const match = /[?&]bewit=([^&]+)/.exec(url);
  return match ? decodeURIComponent(match[1]) : undefined;
}

export function createAuthenticator(store: ClientStore, nonces = new NonceCache()) {
  return async function authenticate(req: RequestForAuth): Promise<AuthContext> {
    const bewit = bewitOf(req.url);
    if (!req.authorization && !bewit) return { clientId: undefined, scopes: [] };
    const [hostName, port] = splitHost(req.host);
    const request = {
      method: req.method,
      url: req.url,
      host: hostName,
      port,
      authorization: req.authorization,
      contentType: req.contentType,
    };
    let id: string | undefined;
    let ext: ExtContent;
    let resolved: { key: string; scopes: string[] };
    try {
      if (req.authorization) {
        const attributes = hawk.utils.parseAuthorizationHeader(req.authorization);
        id = attributes.id;
        if (!id) throw authFailed('the Hawk header has no id');
        ext = parseExt(attributes.ext);
        resolved = await resolveCredentials(store, id, ext);
        const { credentials, artifacts } = await hawk.server.authenticate(
          request,
          () => ({ id: id as string, key: resolved.key, algorithm: 'sha256' }),
          { timestampSkewSec: TIMESTAMP_SKEW_SECONDS, nonceFunc: (key, nonce, ts) => nonces.check(key, nonce, ts) },
        );
        if (artifacts.hash) {
          hawk.server.authenticatePayload(req.rawBody ?? '', credentials, artifacts, req.contentType);
        }
      } else {
        const [bewitId, , , bewitExt] = Buffer.from(bewit as string, 'base64url').toString('utf8').split('\\');
        id = bewitId;
        if (!id) throw authFailed('the bewit has no id');
        ext = parseExt(bewitExt);
        resolved = await resolveCredentials(store, id, ext);
        await hawk.server.authenticateBewit(request, () => ({ id: id as string, key: resolved.key, algorithm: 'sha256' }), {
          timestampSkewSec: TIMESTAMP_SKEW_SECONDS,
        });
      }
    } catch (err) {
      if (err instanceof TgsError) throw err;
      const message = (err as Error).message || 'authentication failed';
      throw authFailed(`Hawk authentication failed: ${message}. Check the clientId, accessToken and the clock.`);
    }
    return { clientId: id, scopes: applyAuthorizedScopes(resolved.scopes, ext) };
  };
}

function splitHost(host: string): [string, number] {
  const match = /^(\[[^\]]+\]|[^:]+)(?::(\d+))?$/.exec(host);
  if (!match) throw authFailed(`invalid Host header ${JSON.stringify(host)}`);
  return [match[1], match[2] ? Number(match[2]) : 80];
}
