import type { Endpoint } from '../../api/endpoint.js';
import { createTaskGraphEndpoint } from './createTaskGraph.js';
import { cancelEndpoint, extendEndpoint, rerunEndpoint, resumeEndpoint } from './actions.js';
import { listTaskGraphsEndpoint } from './list.js';
import { explainGraphEndpoint } from './explain.js';
import { taskGraphNodesEndpoint } from './nodes.js';
import { taskGraphChangesEndpoint } from './changes.js';
import { cacheEndpoints } from './cache.js';
import { amendEndpoint } from './amend.js';
import { graphFileEndpoint } from './file.js';
import { infoEndpoint, inspectEndpoint, inspectTaskEndpoint, pingEndpoint, statusEndpoint } from './reads.js';

/** The scheduler API (`/api/scheduler/v1`). */
export const schedulerEndpoints: Endpoint[] = [
  pingEndpoint,
  createTaskGraphEndpoint,
  statusEndpoint,
  infoEndpoint,
  inspectEndpoint,
  inspectTaskEndpoint,
  explainGraphEndpoint,
  listTaskGraphsEndpoint,
  taskGraphNodesEndpoint,
  taskGraphChangesEndpoint,
  extendEndpoint,
  rerunEndpoint,
  cancelEndpoint,
  resumeEndpoint,
  amendEndpoint,
  graphFileEndpoint,
  ...cacheEndpoints,
];
