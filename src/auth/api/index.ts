import type { Endpoint } from '../../api/endpoint.js';
import { client, createClient, deleteClient, listClients, resetAccessToken, updateClient } from './clients.js';
import { ping } from './ping.js';
import { currentScopes } from './scopes.js';

/** The auth API (`/api/auth/v1`): clients and their scopes. */
export const authEndpoints: Endpoint[] = [ping, listClients, client, createClient, updateClient, resetAccessToken, deleteClient, currentScopes];
