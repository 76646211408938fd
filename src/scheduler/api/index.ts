import type { Endpoint } from '../../api/endpoint.js';
import { createTaskGraphEndpoint } from './createTaskGraph.js';
import { cancelEndpoint, extendEndpoint, rerunEndpoint } from './actionEndpoints.js';
import { listTaskGraphsEndpoint } from './listEndpoint.js';
import { taskGraphNodesEndpoint } from './nodesEndpoint.js';
import { taskGraphChangesEndpoint } from './changesEndpoint.js';
import { infoEndpoint, inspectEndpoint, inspectTaskEndpoint, pingEndpoint, statusEndpoint } from './readEndpoints.js';

/** The scheduler API (`/api/scheduler/v1`). */
export const schedulerEndpoints: Endpoint[] = [
  pingEndpoint,
  createTaskGraphEndpoint,
  statusEndpoint,
  infoEndpoint,
  inspectEndpoint,
  inspectTaskEndpoint,
  listTaskGraphsEndpoint,
  taskGraphNodesEndpoint,
  taskGraphChangesEndpoint,
  extendEndpoint,
  rerunEndpoint,
  cancelEndpoint,
];
