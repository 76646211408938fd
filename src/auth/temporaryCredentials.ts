import { createHmac, randomBytes } from 'node:crypto';

/** Taskcluster's temporary-credential certificate, carried in the Hawk `ext`. */
export interface Certificate {
  version: 1;
  scopes: string[];
  start: number;
  expiry: number;
  seed: string;
  signature: string;
  /** Present for named temporary credentials: the clientId that signed the certificate. */
  issuer?: string;
}

export interface TemporaryCredentials {
  clientId: string;
  accessToken: string;
  certificate: string;
}

/** Taskcluster's signature: HMAC-SHA256 with the issuer's token over the certificate's fields. */
export function certificateSignature(issuerAccessToken: string, cert: Omit<Certificate, 'signature'>, clientId?: string): string {
  const hmac = createHmac('sha256', issuerAccessToken);
  hmac.update(`version:${cert.version}\n`);
  if (cert.issuer) {
    hmac.update(`clientId:${clientId}\n`);
    hmac.update(`issuer:${cert.issuer}\n`);
  }
  hmac.update(`seed:${cert.seed}\n`);
  hmac.update(`start:${cert.start}\n`);
  hmac.update(`expiry:${cert.expiry}\n`);
  hmac.update('scopes:\n');
  hmac.update(cert.scopes.join('\n'));
  return hmac.digest('base64');
}

/** The temporary access token: HMAC-SHA256 of the seed with the issuer's token, base64url. */
export function temporaryAccessToken(issuerAccessToken: string, seed: string): string {
  return createHmac('sha256', issuerAccessToken).update(seed).digest('base64url');
}

export function createTemporaryCredentials(options: {
  issuerClientId: string;
  issuerAccessToken: string;
  /** A name makes them named temporary credentials (the certificate records the issuer). */
  clientId?: string;
  scopes: string[];
  start: Date;
  expiry: Date;
}): TemporaryCredentials {
  const seed = randomBytes(33).toString('base64url').slice(0, 44);
  const base: Omit<Certificate, 'signature'> = {
    version: 1,
    scopes: options.scopes,
    start: options.start.getTime(),
    expiry: options.expiry.getTime(),
    seed,
    ...(options.clientId ? { issuer: options.issuerClientId } : {}),
  };
  const certificate: Certificate = {
    ...base,
    signature: certificateSignature(options.issuerAccessToken, base, options.clientId),
  };
  return {
    clientId: options.clientId ?? options.issuerClientId,
    accessToken: temporaryAccessToken(options.issuerAccessToken, seed),
    certificate: JSON.stringify(certificate),
  };
}
