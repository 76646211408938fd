import type { Endpoint } from '../../api/endpoint.js';
import { client, createClient, deleteClient, disableClient, enableClient, listClients, resetAccessToken, updateClient } from './clients.js';
import { ping } from './ping.js';
import { getEntityHistory, listAuditHistory } from './audit.js';
import { authenticateHawk, testAuthenticate, testAuthenticateGet } from './authenticate.js';
import { currentScopes } from './scopes.js';
import { createRole, deleteRole, expandScopes, listRoleIds, listRoles, listRoles2, role, updateRole } from './roles.js';
import { healthEndpoints } from '../../api/health.js';

/** The auth API (`/api/auth/v1`): clients and their scopes. */
export const authEndpoints: Endpoint[] = [
  ping,
  ...healthEndpoints('auth'),
  listClients,
  client,
  createClient,
  getEntityHistory,
  listAuditHistory,
  updateClient,
  resetAccessToken,
  enableClient,
  disableClient,
  deleteClient,
  listRoles,
  listRoles2,
  listRoleIds,
  role,
  createRole,
  updateRole,
  deleteRole,
  expandScopes,
  currentScopes,
  authenticateHawk,
  testAuthenticate,
  testAuthenticateGet,
];
