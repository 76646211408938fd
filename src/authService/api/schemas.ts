import type { JsonSchema } from '../../api/endpoint.js';
import { pagedListSchema } from '../../api/paging.js';
import { TgsError } from '../../errors.js';


const scope: JsonSchema = { type: 'string', pattern: '^[\\x20-\\x7e]*$', maxLength: 1024 };

/** Taskcluster's create-client-request (also updateClient's input). */
export const createClientRequest: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['expires', 'description'],
  properties: {
    expires: { type: 'string', format: 'date-time' },
    deleteOnExpiration: { type: 'boolean', default: false },
    description: { type: 'string', maxLength: 10240 },
    scopes: { type: 'array', items: scope, uniqueItems: true },
  },
};

const clientProperties = {
  clientId: { type: 'string' },
  description: { type: 'string' },
  expires: { type: 'string', format: 'date-time' },
  created: { type: 'string', format: 'date-time' },
  lastModified: { type: 'string', format: 'date-time' },
  lastDateUsed: { type: 'string', format: 'date-time' },
  lastRotated: { type: 'string', format: 'date-time' },
  deleteOnExpiration: { type: 'boolean' },
  scopes: { type: 'array', items: { type: 'string' } },
  expandedScopes: { type: 'array', items: { type: 'string' } },
  disabled: { type: 'boolean' },
};
const clientRequired = Object.keys(clientProperties);

/** Taskcluster's get-client-response: never carries the access token. */
export const getClientResponse: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: clientRequired,
  properties: clientProperties,
};

/** Taskcluster's create-client-response: the client and its access token. */
export const createClientResponse: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: [...clientRequired, 'accessToken'],
  properties: { ...clientProperties, accessToken: { type: 'string', minLength: 22 } },
};

export const listClientsResponse = pagedListSchema('clients', getClientResponse);

export const scopeSet: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['scopes'],
  properties: { scopes: { type: 'array', items: { type: 'string' } } },
};

/** Taskcluster refuses scopes ending in `**` in clients and roles. */
export function refuseDoubleStar(scopes: string[] | undefined): void {
  const bad = (scopes ?? []).filter((s) => s.endsWith('**'));
  if (bad.length > 0) throw new TgsError('InputError', `scopes must not end with \`**\`: ${bad.join(', ')}`);
}

/** Taskcluster's scopeset as a request body (expandScopes). */
export const scopeSetInput: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['scopes'],
  properties: { scopes: { type: 'array', items: scope, maxItems: 10000 } },
};

/** Taskcluster's create-role-request (also updateRole's input). */
export const createRoleRequest: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['scopes', 'description'],
  properties: {
    scopes: { type: 'array', items: scope, uniqueItems: true, maxItems: 10000 },
    description: { type: 'string', maxLength: 10240 },
  },
};

export const getRoleResponse: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['roleId', 'scopes', 'description', 'created', 'lastModified', 'expandedScopes'],
  properties: {
    roleId: { type: 'string' },
    scopes: { type: 'array', items: { type: 'string' } },
    description: { type: 'string' },
    created: { type: 'string', format: 'date-time' },
    lastModified: { type: 'string', format: 'date-time' },
    expandedScopes: { type: 'array', items: { type: 'string' } },
  },
};

export const listRolesResponse: JsonSchema = { type: 'array', items: getRoleResponse };

export const listRoles2Response = pagedListSchema('roles', getRoleResponse);

export const listRoleIdsResponse = pagedListSchema('roleIds', { type: 'string' });
