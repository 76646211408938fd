import type { JsonSchema } from '../../api/endpoint.js';

/** Taskcluster's clientId pattern (auth service). */
export const CLIENT_ID = /^[A-Za-z0-9!@/:.+|_-]{1,256}$/;

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

export const listClientsResponse: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['clients'],
  properties: { clients: { type: 'array', items: getClientResponse }, continuationToken: { type: 'string' } },
};

export const scopeSet: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['scopes'],
  properties: { scopes: { type: 'array', items: { type: 'string' } } },
};
