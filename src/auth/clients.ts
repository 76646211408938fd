import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db/pool.js';
import { ROOT_CLIENT_ID } from '../config.js';
import type { ClientRecord, ClientStore } from './authenticate.js';

/** The queue signs workers' per-run temporary credentials with this client's token. */
export const ISSUER_CLIENT_ID = 'static/tgs/queue';

export function generateAccessToken(): string {
  return randomBytes(33).toString('base64url');
}

interface ClientRow {
  client_id: string;
  access_token: string;
  scopes: string[];
  expires: Date;
}

const toRecord = (row: ClientRow): ClientRecord => ({
  clientId: row.client_id,
  accessToken: row.access_token,
  scopes: row.scopes,
  expires: row.expires,
});

/** Clients in Postgres, plus the root client from TGS_ROOT_ACCESS_TOKEN (never stored). */
export function createClientStore(db: Queryable, rootAccessToken: string): ClientStore {
  // The issuer signs every worker's per-run credentials and never changes: one lookup, not one per request.
  let issuer: ClientRecord | undefined;
  return {
    async get(clientId) {
      if (clientId === ROOT_CLIENT_ID) {
        return rootAccessToken ? { clientId, accessToken: rootAccessToken, scopes: ['*'] } : undefined;
      }
      if (clientId === ISSUER_CLIENT_ID && issuer) return issuer;
      const { rows } = await db.query<ClientRow>(
        'SELECT client_id, access_token, scopes, expires FROM clients WHERE client_id = $1',
        [clientId],
      );
      const record = rows[0] ? toRecord(rows[0]) : undefined;
      if (clientId === ISSUER_CLIENT_ID) issuer = record;
      return record;
    },
  };
}

/** Creates the issuer client on first start (any process may race; one insert wins). */
export async function ensureIssuerClient(db: Queryable): Promise<ClientRecord> {
  await db.query(
    `INSERT INTO clients (client_id, access_token, scopes, description, expires)
     VALUES ($1, $2, '{*}', 'signs the temporary credentials that claimWork hands to workers', '9999-12-31')
     ON CONFLICT (client_id) DO NOTHING`,
    [ISSUER_CLIENT_ID, generateAccessToken()],
  );
  const { rows } = await db.query<ClientRow>(
    'SELECT client_id, access_token, scopes, expires FROM clients WHERE client_id = $1',
    [ISSUER_CLIENT_ID],
  );
  return toRecord(rows[0]);
}
