import type { Endpoint } from '../../api/endpoint.js';

/** The scheduler API (`/api/scheduler/v1`). */
export const schedulerEndpoints: Endpoint[] = [];
