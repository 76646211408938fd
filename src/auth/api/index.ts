import type { Endpoint } from '../../api/endpoint.js';

/** The auth API (`/api/auth/v1`): clients and their scopes. */
export const authEndpoints: Endpoint[] = [];
