import type { Endpoint } from '../../api/endpoint.js';
import { ping } from './ping.js';
import { cancelTask, createTask, getStatus, getTask, rerunTask, scheduleTask } from './tasks.js';
import { claimTask, claimWork, pendingTasks, reclaimTask, reportCompleted, reportException, reportFailed } from './claims.js';
import { reportResolutions } from './resolutions.js';
import { workerStream } from './workerStream.js';
import { explainTaskEndpoint } from './explain.js';
import { healthEndpoints } from '../../api/health.js';
import { finishArtifact } from './artifacts/finish.js';
import { getTaskQueue, listClaimedTasks, listPendingTasks, listTaskQueues, taskQueueCounts } from './taskQueues.js';
import { statuses, tasks } from './taskBatches.js';
import { declareProvisioner, declareWorkerType, getProvisioner, getWorkerType, listProvisioners, listWorkerTypes } from './provisioners.js';
import { declareWorker, getWorker, listWorkers, quarantineWorker } from './workers.js';
import { cancelTaskGroup, getTaskGroup, listDependentTasks, listTaskGroup, sealTaskGroup } from './groups.js';

/** Every queue endpoint, in the order the OpenAPI document lists them. */
export const queueEndpoints: Endpoint[] = [
  ping,
  ...healthEndpoints('queue'),
  createTask,
  getTask,
  getStatus,
  tasks,
  statuses,
  explainTaskEndpoint,
  scheduleTask,
  rerunTask,
  cancelTask,
  claimWork,
  claimTask,
  reclaimTask,
  reportCompleted,
  reportFailed,
  reportException,
  reportResolutions,
  workerStream,
  pendingTasks,
  listTaskGroup,
  getTaskGroup,
  sealTaskGroup,
  cancelTaskGroup,
  listDependentTasks,
  finishArtifact,
  listTaskQueues,
  getTaskQueue,
  taskQueueCounts,
  listPendingTasks,
  listClaimedTasks,
  listProvisioners,
  getProvisioner,
  declareProvisioner,
  listWorkerTypes,
  getWorkerType,
  declareWorkerType,
  listWorkers,
  getWorker,
  quarantineWorker,
  declareWorker,
];
