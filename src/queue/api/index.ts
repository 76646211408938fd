import type { Endpoint } from '../../api/endpoint.js';
import { ping } from './ping.js';

/** Every queue endpoint, in the order the OpenAPI document lists them. */
export const queueEndpoints: Endpoint[] = [ping];
