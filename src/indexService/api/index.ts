import type { Endpoint } from '../../api/endpoint.js';
import { healthEndpoints } from '../../api/health.js';
import { pingEndpoint } from '../../api/ping.js';
import { findArtifactFromTask } from './artifact.js';
import { findTasksAtIndex, listNamespaces, listTasks } from './lists.js';
import { deleteTask, findTask, insertTask } from './tasks.js';

/** Every index endpoint, in the order the OpenAPI document lists them (Taskcluster's reference order). */
export const indexEndpoints: Endpoint[] = [
  pingEndpoint('index'),
  ...healthEndpoints('index'),
  findTask,
  findTasksAtIndex,
  listNamespaces,
  listTasks,
  insertTask,
  deleteTask,
  findArtifactFromTask,
];
