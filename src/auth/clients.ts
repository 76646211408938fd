import { randomBytes } from 'node:crypto';
import type { Queryable } from '../db/pool.js';
import { ROOT_CLIENT_ID } from '../config.js';
import { TgsError } from '../errors.js';
import type { ClientRecord, ClientStore } from './types.js';
import { AUDIT_ACTION, SWEEP_CLIENT_ID } from './audit.js';

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

/**
 * Clients in Postgres, plus the root client from TGS_ROOT_ACCESS_TOKEN (never stored). Every other client is
 * read from Postgres on each request, so a deleted client or a reset token stops working at once, in every
 * API process.
 */
export function createClientStore(db: Queryable, rootAccessToken: string, issuer?: { current: ClientRecord }): ClientStore {
  return {
    async get(clientId) {
      if (clientId === ROOT_CLIENT_ID) {
        return rootAccessToken ? { clientId, accessToken: rootAccessToken, scopes: ['*'] } : undefined;
      }
      // The issuer verifies every worker's per-run credentials: the process's copy (src/auth/issuer.ts, read
      // again every few seconds), not one lookup per request.
      if (clientId === ISSUER_CLIENT_ID && issuer) return issuer.current;
      // The roles generation rides along (a one-row read, no extra round trip): a role change is seen by
      // this client's request whatever process made it (src/auth/roleStore.ts).
      const { rows } = await db.query<ClientRow & { disabled: boolean; roles_generation: number }>(
        'SELECT client_id, access_token, scopes, expires, disabled, (SELECT generation FROM roles_generation) AS roles_generation FROM clients WHERE client_id = $1',
        [clientId],
      );
      return rows[0] ? { ...toRecord(rows[0]), disabled: rows[0].disabled, rolesGeneration: rows[0].roles_generation } : undefined;
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
  return (await readIssuerClient(db)) as ClientRecord;
}

/**
 * Gives the issuer client a new token (after a leak): every API process uses it within ISSUER_REFRESH_MS
 * (src/auth/issuer.ts), and what the old one signed — run credentials, artifact URLs — stops working.
 */
export async function rotateIssuerToken(db: Queryable): Promise<void> {
  const { rowCount } = await db.query('UPDATE clients SET access_token = $2, last_rotated = now() WHERE client_id = $1', [ISSUER_CLIENT_ID, generateAccessToken()]);
  if (rowCount === 0) throw new Error(`no ${ISSUER_CLIENT_ID} client in this database: has \`tgs migrate\` or \`tgs api\` run against it?`);
}

/** The issuer client's row, or undefined where it does not exist. */
export async function readIssuerClient(db: Queryable): Promise<ClientRecord | undefined> {
  const { rows } = await db.query<ClientRow & { disabled: boolean }>(
    'SELECT client_id, access_token, scopes, expires, disabled FROM clients WHERE client_id = $1',
    [ISSUER_CLIENT_ID],
  );
  return rows[0] ? { ...toRecord(rows[0]), disabled: rows[0].disabled } : undefined;
}

/**
 * Creates or updates a `static/` client the deployment itself manages (tgs dev's workers): its scopes and
 * description become these; its token is kept, so every process sharing the database (two tgs dev on one Postgres)
 * gets the same working credentials.
 */
export async function ensureStaticClient(db: Queryable, clientId: string, scopes: string[], description: string): Promise<ClientRecord> {
  if (!isStaticClientId(clientId)) throw new Error(`ensureStaticClient: ${clientId} is not a static/ client`);
  const { rows } = await db.query<ClientRow>(
    `INSERT INTO clients (client_id, access_token, scopes, description, expires)
     VALUES ($1, $2, $3, $4, '9999-12-31')
     ON CONFLICT (client_id) DO UPDATE SET scopes = EXCLUDED.scopes, description = EXCLUDED.description, expires = EXCLUDED.expires,
       last_modified = CASE WHEN clients.scopes = EXCLUDED.scopes THEN clients.last_modified ELSE now() END
     RETURNING client_id, access_token, scopes, expires`,
    [clientId, generateAccessToken(), scopes, description],
  );
  return toRecord(rows[0]);
}

/** `static/` clients are configured by the deployment (root, issuer); the auth API never changes them. */
export const isStaticClientId = (clientId: string) => clientId.startsWith('static/');

/** A client as the auth API shows it (Taskcluster's get-client-response, without the access token). */
export interface ClientInfo {
  clientId: string;
  description: string;
  expires: string;
  created: string;
  lastModified: string;
  lastDateUsed: string;
  lastRotated: string;
  deleteOnExpiration: boolean;
  scopes: string[];
  expandedScopes: string[];
  disabled: boolean;
}

export interface ClientSettings {
  description: string;
  expires: string;
  scopes: string[];
  deleteOnExpiration: boolean;
}

interface FullClientRow extends ClientRow {
  description: string;
  created: Date;
  last_modified: Date;
  last_rotated: Date;
  last_date_used: Date | null;
  delete_on_expiration: boolean;
  disabled: boolean;
}

const FULL_COLUMNS =
  'client_id, access_token, scopes, expires, description, created, last_modified, last_rotated, last_date_used, delete_on_expiration, disabled';

function toInfo(row: FullClientRow): ClientInfo {
  return {
    clientId: row.client_id,
    description: row.description,
    expires: row.expires.toISOString(),
    created: row.created.toISOString(),
    lastModified: row.last_modified.toISOString(),
    // Taskcluster starts lastDateUsed at the creation time.
    lastDateUsed: (row.last_date_used ?? row.created).toISOString(),
    lastRotated: row.last_rotated.toISOString(),
    deleteOnExpiration: row.delete_on_expiration,
    scopes: row.scopes,
    // the auth API fills in the expansion through the roles (src/authService/api/clients.ts)
    expandedScopes: row.scopes,
    disabled: row.disabled,
  };
}

export async function getClient(db: Queryable, clientId: string): Promise<ClientInfo | undefined> {
  const { rows } = await db.query<FullClientRow>(`SELECT ${FULL_COLUMNS} FROM clients WHERE client_id = $1`, [clientId]);
  return rows[0] ? toInfo(rows[0]) : undefined;
}

function sameScopes(a: string[], b: string[]): boolean {
  const x = [...a].sort();
  const y = [...b].sort();
  return x.length === y.length && x.every((s, i) => s === y[i]);
}

/**
 * Creates a client. Repeating the same request (same description, expires, scopes, deleteOnExpiration)
 * answers with the existing client, so a retry after a lost response works; different settings → 409.
 */
export async function createClient(
  db: Queryable,
  clientId: string,
  settings: ClientSettings,
): Promise<ClientInfo & { accessToken: string; inserted: boolean }> {
  const { rows } = await db.query<FullClientRow>(
    `INSERT INTO clients (client_id, access_token, scopes, description, expires, delete_on_expiration)
     VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (client_id) DO NOTHING RETURNING ${FULL_COLUMNS}`,
    [clientId, generateAccessToken(), settings.scopes, settings.description, settings.expires, settings.deleteOnExpiration],
  );
  let row = rows[0];
  const inserted = row !== undefined;
  if (!row) {
    const existing = await db.query<FullClientRow>(`SELECT ${FULL_COLUMNS} FROM clients WHERE client_id = $1`, [clientId]);
    row = existing.rows[0];
    const same =
      row &&
      row.description === settings.description &&
      row.expires.getTime() === new Date(settings.expires).getTime() &&
      row.delete_on_expiration === settings.deleteOnExpiration &&
      sameScopes(row.scopes, settings.scopes);
    if (!same) throw new TgsError('RequestConflict', `client ${clientId} already exists with different settings; use updateClient to change it`);
  }
  return { ...toInfo(row), accessToken: row.access_token, inserted };
}

/** Replaces description, expires, deleteOnExpiration and (when given) scopes. */
export async function updateClient(
  db: Queryable,
  clientId: string,
  settings: Omit<ClientSettings, 'scopes'> & { scopes?: string[] },
): Promise<ClientInfo | undefined> {
  const { rows } = await db.query<FullClientRow>(
    `UPDATE clients SET description = $2, expires = $3, delete_on_expiration = $4, scopes = coalesce($5, scopes), last_modified = now()
     WHERE client_id = $1 RETURNING ${FULL_COLUMNS}`,
    [clientId, settings.description, settings.expires, settings.deleteOnExpiration, settings.scopes ?? null],
  );
  return rows[0] ? toInfo(rows[0]) : undefined;
}

export async function resetAccessToken(db: Queryable, clientId: string): Promise<(ClientInfo & { accessToken: string }) | undefined> {
  const { rows } = await db.query<FullClientRow>(
    `UPDATE clients SET access_token = $2, last_rotated = now(), last_modified = now() WHERE client_id = $1 RETURNING ${FULL_COLUMNS}`,
    [clientId, generateAccessToken()],
  );
  return rows[0] ? { ...toInfo(rows[0]), accessToken: rows[0].access_token } : undefined;
}

/** Deletes a client; false when there was none. */
export async function deleteClient(db: Queryable, clientId: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM clients WHERE client_id = $1', [clientId]);
  return (rowCount ?? 0) > 0;
}

/** One page of clients in clientId order, after `after`, optionally only those starting with `prefix`. */
export async function listClients(db: Queryable, options: { prefix?: string; after?: string; limit: number }): Promise<ClientInfo[]> {
  const { rows } = await db.query<FullClientRow>(
    `SELECT ${FULL_COLUMNS} FROM clients WHERE client_id > $1 AND starts_with(client_id, $2) ORDER BY client_id LIMIT $3`,
    [options.after ?? '', options.prefix ?? '', options.limit],
  );
  return rows.map(toInfo);
}

/**
 * Removes expired clients that were created with deleteOnExpiration (Taskcluster's expire-clients job), each with
 * its `expired` audit row, in one statement.
 */
export async function deleteExpiredClients(db: Queryable): Promise<number> {
  const { rowCount } = await db.query(
    `WITH gone AS (DELETE FROM clients WHERE delete_on_expiration AND expires < now() RETURNING client_id)
     INSERT INTO audit_history (entity_type, entity_id, client_id, action_type) SELECT 'client', client_id, $1, $2 FROM gone`,
    [SWEEP_CLIENT_ID, AUDIT_ACTION.expired],
  );
  return rowCount ?? 0;
}

/** enableClient / disableClient; undefined when there is no such client. */
export async function setClientDisabled(db: Queryable, clientId: string, disabled: boolean): Promise<ClientInfo | undefined> {
  const { rows } = await db.query<FullClientRow>(
    `UPDATE clients SET disabled = $2, last_modified = now() WHERE client_id = $1 RETURNING ${FULL_COLUMNS}`,
    [clientId, disabled],
  );
  return rows[0] ? toInfo(rows[0]) : undefined;
}
