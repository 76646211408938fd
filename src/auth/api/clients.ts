import { declare } from '../../api/endpoint.js';
import { TgsError } from '../../errors.js';
import { decodeToken, encodeToken, LIMIT, TOKEN } from '../../queue/api/schemas.js';
import {
  createClient as createClientRow,
  deleteClient as deleteClientRow,
  getClient,
  isStaticClientId,
  listClients as listClientRows,
  resetAccessToken as resetAccessTokenRow,
  updateClient as updateClientRow,
  type ClientSettings,
} from '../clients.js';
import { CLIENT_ID, createClientRequest, createClientResponse, getClientResponse, listClientsResponse } from './schemas.js';

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

function refuseDoubleStar(scopes: string[] | undefined): void {
  const bad = (scopes ?? []).filter((s) => s.endsWith('**'));
  if (bad.length > 0) throw new TgsError('InputError', `scopes must not end with \`**\`: ${bad.join(', ')}`);
}

const notFound = (clientId: string) => new TgsError('ResourceNotFound', `client ${clientId} not found`);

export const listClients = declare({
  service: 'auth',
  name: 'listClients',
  title: 'List Clients',
  description: 'Clients in clientId order; with `prefix`, only those whose clientId starts with it. Paged (limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/clients/',
  query: { prefix: CLIENT_ID, continuationToken: TOKEN, limit: LIMIT },
  scopes: 'auth:list-clients',
  output: listClientsResponse,
  async handler({ query, deps }) {
    const limit = Math.min(Number(query.limit ?? 1000), 1000);
    const rows = await listClientRows(deps.pool, { prefix: query.prefix, after: decodeToken(query.continuationToken), limit: limit + 1 });
    const page = rows.slice(0, limit);
    return {
      clients: page,
      ...(rows.length > limit ? { continuationToken: encodeToken(page[page.length - 1].clientId) } : {}),
    };
  },
});

export const client = declare({
  service: 'auth',
  name: 'client',
  title: 'Get Client',
  description: 'A client: description, expiry, scopes. The access token is never shown again after createClient / resetAccessToken.',
  method: 'get',
  route: '/clients/<clientId>',
  params: { clientId: CLIENT_ID },
  scopes: 'auth:get-client:<clientId>',
  output: getClientResponse,
  async handler({ params, deps }) {
    const found = await getClient(deps.pool, params.clientId);
    if (!found) throw notFound(params.clientId);
    return found;
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
  params: { clientId: CLIENT_ID },
  scopes: { AllOf: ['auth:create-client:<clientId>', { for: 'scope', in: 'scopes', each: '<scope>' }] },
  input: createClientRequest,
  output: createClientResponse,
  async handler({ params, body, deps, authorize }) {
    refuseStatic(params.clientId);
    const scopes = body.scopes ?? [];
    refuseDoubleStar(scopes);
    authorize({ scopes });
    return createClientRow(deps.pool, params.clientId, {
      description: body.description,
      expires: body.expires,
      scopes,
      deleteOnExpiration: body.deleteOnExpiration,
    });
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
  params: { clientId: CLIENT_ID },
  scopes: { AllOf: ['auth:update-client:<clientId>', { for: 'scope', in: 'scopesAdded', each: '<scope>' }] },
  input: createClientRequest,
  output: getClientResponse,
  async handler({ params, body, deps, authorize }) {
    refuseStatic(params.clientId);
    refuseDoubleStar(body.scopes);
    const existing = await getClient(deps.pool, params.clientId);
    if (!existing) throw notFound(params.clientId);
    const scopesAdded = (body.scopes ?? []).filter((s) => !existing.scopes.includes(s));
    authorize({ scopesAdded });
    const updated = await updateClientRow(deps.pool, params.clientId, body);
    if (!updated) throw notFound(params.clientId);
    return updated;
  },
});

export const resetAccessToken = declare({
  service: 'auth',
  name: 'resetAccessToken',
  title: 'Reset `accessToken`',
  description: 'Replace a client\'s access token with a new one, returned once. The old token stops working at once.',
  method: 'post',
  route: '/clients/<clientId>/reset',
  params: { clientId: CLIENT_ID },
  scopes: 'auth:reset-access-token:<clientId>',
  output: createClientResponse,
  async handler({ params, deps }) {
    refuseStatic(params.clientId);
    const reset = await resetAccessTokenRow(deps.pool, params.clientId);
    if (!reset) throw notFound(params.clientId);
    return reset;
  },
});

export const deleteClient = declare({
  service: 'auth',
  name: 'deleteClient',
  title: 'Delete Client',
  description: 'Delete a client; its credentials stop working at once. Deleting a client that does not exist succeeds (Taskcluster).',
  method: 'delete',
  route: '/clients/<clientId>',
  params: { clientId: CLIENT_ID },
  scopes: 'auth:delete-client:<clientId>',
  async handler({ params, deps }) {
    refuseStatic(params.clientId);
    await deleteClientRow(deps.pool, params.clientId);
    return {};
  },
});
