import type { Endpoint } from '../../../api/endpoint.js';

/** Artifact endpoints of the queue API. */
export const artifactEndpoints: Endpoint[] = [];
