import type { Endpoint } from '../../api/endpoint.js';
import { ping } from './ping.js';
import { cancelTask, createTask, getStatus, getTask, rerunTask, scheduleTask } from './tasks.js';
import { claimWork, pendingTasks, reclaimTask, reportCompleted, reportException, reportFailed } from './claims.js';
import { cancelTaskGroup, getTaskGroup, listDependentTasks, listTaskGroup, sealTaskGroup } from './groups.js';

/** Every queue endpoint, in the order the OpenAPI document lists them. */
export const queueEndpoints: Endpoint[] = [
  ping,
  createTask,
  getTask,
  getStatus,
  scheduleTask,
  rerunTask,
  cancelTask,
  claimWork,
  reclaimTask,
  reportCompleted,
  reportFailed,
  reportException,
  pendingTasks,
  listTaskGroup,
  getTaskGroup,
  sealTaskGroup,
  cancelTaskGroup,
  listDependentTasks,
];
