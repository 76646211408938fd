import type { ApiDeps } from '../../api/deps.js';
import { CLIENT_ID } from '../../api/patterns.js';
import { declare } from '../../api/endpoint.js';
import { CLIENT_BODY_LIMIT } from '../../api/bodyLimits.js';
import { TgsError } from '../../errors.js';
import { PAGE_QUERY, readPage } from '../../api/paging.js';
import {
  createClient as createClientRow,
  deleteClient as deleteClientRow,
  getClient,
  isStaticClientId,
  listClients as listClientRows,
  resetAccessToken as resetAccessTokenRow,
  setClientDisabled,
  updateClient as updateClientRow,
  type ClientSettings,
} from '../../auth/clients.js';
import { withTransaction, type Queryable } from '../../db/pool.js';
import { AUDIT_ACTION, auditClientId, recordAudit, type AuditAction } from '../../auth/audit.js';
import type { AuthContext } from '../../auth/authenticate.js';
import { refuseDoubleStar, createClientRequest, createClientResponse, getClientResponse, listClientsResponse } from './schemas.js';

type ClientRequest = Omit<ClientSettings, 'scopes'> & { scopes?: string[] };

function refuseStatic(clientId: string): void {
  if (isStaticClientId(clientId)) {
    throw new TgsError(
      'InputError',
      `clientId "${clientId}" starts with "static/", which is reserved for clients configured by the deployment ` +
        '(TGS_ROOT_ACCESS_TOKEN, the queue\'s issuer); the auth API cannot change them',
    );
  }
}

/** A client as the API shows it: `expandedScopes` are its scopes through the roles. */
async function withExpanded<T extends { scopes: string[] }>(deps: ApiDeps, client: T): Promise<T & { expandedScopes: string[] }> {
  return { ...client, expandedScopes: (await deps.roles.current()).expand(client.scopes) };
}

const notFound = (clientId: string) => new TgsError('ResourceNotFound', `client ${clientId} not found`);

/**
 * Runs a change of the client `clientId` in a transaction that also writes its audit row (who: the caller), when
 * `made` says the change was made; nothing is recorded for a change that fails or changes nothing.
 */
function audited<T>(
  deps: ApiDeps,
  auth: AuthContext,
  clientId: string,
  action: AuditAction,
  change: (tx: Queryable) => Promise<T>,
  made: (result: T) => boolean = (result) => result !== undefined,
): Promise<T> {
  return withTransaction(deps.pool, async (tx) => {
    const result = await change(tx);
    if (made(result)) await recordAudit(tx, { entityType: 'client', entityId: clientId, clientId: auditClientId(auth.clientId), action });
    return result;
  });
}

export const listClients = declare({
  service: 'auth',
  name: 'listClients',
  title: 'List Clients',
  description: 'Clients in clientId order; with `prefix`, only those whose clientId starts with it. Paged (limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/clients/',
  query: { prefix: CLIENT_ID, ...PAGE_QUERY },
  scopes: 'auth:list-clients',
  output: listClientsResponse,
  async handler({ query, deps }) {
    const { page, next } = await readPage(query, (after, limit) => listClientRows(deps.pool, { prefix: query.prefix, after, limit }), (c) => c.clientId);
    return { clients: await Promise.all(page.map((c) => withExpanded(deps, c))), ...next };
  },
});

export const client = declare({
  service: 'auth',
  name: 'client',
  title: 'Get Client',
  description: 'A client: description, expiry, scopes. The access token is never shown again after createClient / resetAccessToken.',
  method: 'get',
  route: '/clients/<clientId>',
  scopes: 'auth:get-client:<clientId>',
  output: getClientResponse,
  async handler({ params, deps }) {
    const found = await getClient(deps.pool, params.clientId);
    if (!found) throw notFound(params.clientId);
    return withExpanded(deps, found);
  },
});

export const createClient = declare<ClientRequest>({
  service: 'auth',
  name: 'createClient',
  title: 'Create Client',
  description:
    'Create a client and get its `accessToken`; store it, it is not shown again (resetAccessToken makes a new one). ' +
    'The caller needs `auth:create-client:<clientId>` and every scope it gives the client. The same request again ' +
    'answers with the existing client; different settings for an existing clientId are a 409. `static/` clients ' +
    'cannot be created.',
  method: 'put',
  route: '/clients/<clientId>',
  scopes: { AllOf: ['auth:create-client:<clientId>', { for: 'scope', in: 'scopes', each: '<scope>' }] },
  input: createClientRequest,
  output: createClientResponse,
  bodyLimit: CLIENT_BODY_LIMIT,
  async handler({ params, body, deps, auth, authorize }) {
    refuseStatic(params.clientId);
    const scopes = body.scopes ?? [];
    refuseDoubleStar(scopes);
    authorize({ scopes });
    const settings = { description: body.description, expires: body.expires, scopes, deleteOnExpiration: body.deleteOnExpiration };
    // the same request again answers the client as it is, and records nothing
    const { inserted: _inserted, ...created } = await audited(
      deps,
      auth,
      params.clientId,
      AUDIT_ACTION.created,
      (tx) => createClientRow(tx, params.clientId, settings),
      (c) => c.inserted,
    );
    return withExpanded(deps, created);
  },
});

export const updateClient = declare<ClientRequest>({
  service: 'auth',
  name: 'updateClient',
  title: 'Update Client',
  description:
    'Replace a client\'s description, expires, deleteOnExpiration and (when given) scopes. The caller needs ' +
    '`auth:update-client:<clientId>` and every scope it adds. The access token is unchanged.',
  method: 'post',
  route: '/clients/<clientId>',
  scopes: { AllOf: ['auth:update-client:<clientId>', { for: 'scope', in: 'scopesAdded', each: '<scope>' }] },
  input: createClientRequest,
  output: getClientResponse,
  bodyLimit: CLIENT_BODY_LIMIT,
  async handler({ params, body, deps, auth, authorize }) {
    refuseStatic(params.clientId);
    refuseDoubleStar(body.scopes);
    const existing = await getClient(deps.pool, params.clientId);
    if (!existing) throw notFound(params.clientId);
    const scopesAdded = (body.scopes ?? []).filter((s) => !existing.scopes.includes(s));
    authorize({ scopesAdded });
    const updated = await audited(deps, auth, params.clientId, AUDIT_ACTION.updated, (tx) => updateClientRow(tx, params.clientId, body));
    if (!updated) throw notFound(params.clientId);
    return withExpanded(deps, updated);
  },
});

export const resetAccessToken = declare({
  service: 'auth',
  name: 'resetAccessToken',
  title: 'Reset `accessToken`',
  description: 'Replace a client\'s access token with a new one, returned once. The old token stops working at once.',
  method: 'post',
  route: '/clients/<clientId>/reset',
  scopes: 'auth:reset-access-token:<clientId>',
  output: createClientResponse,
  async handler({ params, deps, auth }) {
    refuseStatic(params.clientId);
    const reset = await audited(deps, auth, params.clientId, AUDIT_ACTION.accessTokenReset, (tx) => resetAccessTokenRow(tx, params.clientId));
    if (!reset) throw notFound(params.clientId);
    return withExpanded(deps, reset);
  },
});

export const deleteClient = declare({
  service: 'auth',
  name: 'deleteClient',
  title: 'Delete Client',
  description: 'Delete a client; its credentials stop working at once. Deleting a client that does not exist succeeds (Taskcluster).',
  method: 'delete',
  route: '/clients/<clientId>',
  scopes: 'auth:delete-client:<clientId>',
  async handler({ params, deps, auth }) {
    refuseStatic(params.clientId);
    // deleting a client that does not exist succeeds, and records nothing: nothing changed
    await audited(deps, auth, params.clientId, AUDIT_ACTION.deleted, (tx) => deleteClientRow(tx, params.clientId), (deleted) => deleted);
    return {};
  },
});

function setDisabled(name: 'enableClient' | 'disableClient', disabled: boolean) {
  const verb = disabled ? 'disable' : 'enable';
  return declare({
    service: 'auth',
    name,
    title: disabled ? 'Disable Client' : 'Enable Client',
    description: disabled
      ? 'Disable a client: its credentials, and temporary credentials it issued, stop working at once; its settings stay. `static/` clients cannot be disabled.'
      : 'Enable a disabled client; enabling an enabled client changes nothing.',
    method: 'post',
    route: `/clients/<clientId>/${verb}`,
    scopes: `auth:${verb}-client:<clientId>`,
    output: getClientResponse,
    async handler({ params, deps, auth }) {
      refuseStatic(params.clientId);
      // recorded on every call, as Taskcluster does, also when the client was already in that state
      const action = disabled ? AUDIT_ACTION.disabled : AUDIT_ACTION.enabled;
      const updated = await audited(deps, auth, params.clientId, action, (tx) => setClientDisabled(tx, params.clientId, disabled));
      if (!updated) throw notFound(params.clientId);
      return withExpanded(deps, updated);
    },
  });
}

export const enableClient = setDisabled('enableClient', false);
export const disableClient = setDisabled('disableClient', true);
