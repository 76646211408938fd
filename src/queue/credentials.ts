import type { ClientRecord } from '../auth/authenticate.js';
import { createTemporaryCredentials, type TemporaryCredentials } from '../auth/temporaryCredentials.js';

/** Per-run credentials handed to the worker that claimed a run (Taskcluster's scheme and clientId). */
export function runCredentials(
  issuer: ClientRecord,
  run: { taskId: string; runId: number; workerGroup: string; workerId: string; takenUntil: Date; taskScopes: string[] },
): TemporaryCredentials {
  return createTemporaryCredentials({
    issuerClientId: issuer.clientId,
    issuerAccessToken: issuer.accessToken,
    clientId: `task-client/${run.taskId}/${run.runId}/on/${run.workerGroup}/${run.workerId}`,
    scopes: [
      `queue:reclaim-task:${run.taskId}/${run.runId}`,
      `queue:resolve-task:${run.taskId}/${run.runId}`,
      `queue:create-artifact:${run.taskId}/${run.runId}`,
      ...run.taskScopes,
    ],
    start: new Date(Date.now() - 15 * 60 * 1000),
    expiry: new Date(run.takenUntil.getTime() + 15 * 60 * 1000),
  });
}
