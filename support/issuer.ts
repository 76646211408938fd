import { ISSUER_CLIENT_ID, generateAccessToken } from '../src/auth/clients.js';
import type { ClientRecord } from '../src/auth/authenticate.js';

/** An issuer of per-run temporary credentials with a fresh token, for claims made outside the API (tests, bench). */
export function testIssuer(): ClientRecord {
  return { clientId: ISSUER_CLIENT_ID, accessToken: generateAccessToken(), scopes: ['*'], expires: new Date('9999-12-31') };
}
