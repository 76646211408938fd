/** Taskcluster's slugid: 22 url-safe base64 characters of a v4 UUID. */
export const SLUGID_PATTERN = '^[A-Za-z0-9_-]{8}[Q-T][A-Za-z0-9_-][CGKOSWaeimquy26-][A-Za-z0-9_-]{10}[AQgw]$';
export const SLUGID = new RegExp(SLUGID_PATTERN);

/** A run's index in the task's `runs` (Taskcluster allows at most 50 runs). */
export const RUN_ID = /^[0-9]{1,2}$/;
/** Taskcluster's identifier: provisionerId, workerType, workerGroup, workerId. */
export const IDENTIFIER = /^[a-zA-Z0-9_-]{1,38}$/;
/** `<provisionerId>/<workerType>`. */
export const TASK_QUEUE_ID = /^[a-zA-Z0-9_-]{1,38}\/[a-zA-Z0-9_-]{1,38}$/;
/** Taskcluster's clientId pattern (auth service). */
export const CLIENT_ID = /^[A-Za-z0-9!@/:.+|_-]{1,256}$/;
/** Taskcluster's hookGroupId and hookId (a hookId may hold `/`, sent as `%2F`). */
export const HOOK_GROUP_ID = /^[a-zA-Z0-9_-]{1,1000}$/;
export const HOOK_ID = /^[a-zA-Z0-9_/-]{1,1000}$/;
/** A hook's trigger token (a slugid when tgs makes it). */
export const TRIGGER_TOKEN = /^[A-Za-z0-9_-]{1,64}$/;
/** A role id: printable ASCII. */
export const ROLE_ID = /^[\x20-\x7e]{1,1024}$/;

/**
 * The pattern every route parameter of this name must match, in every endpoint: `declare()` adds it to an
 * endpoint's `params` unless the endpoint names its own. A parameter not listed here (an artifact name, a label)
 * is checked by the endpoint that has it.
 */
export const ROUTE_PARAMS: Readonly<Record<string, RegExp>> = {
  taskId: SLUGID,
  taskGroupId: SLUGID,
  taskGraphId: SLUGID,
  runId: RUN_ID,
  provisionerId: IDENTIFIER,
  workerType: IDENTIFIER,
  workerGroup: IDENTIFIER,
  workerId: IDENTIFIER,
  taskQueueId: TASK_QUEUE_ID,
  clientId: CLIENT_ID,
  roleId: ROLE_ID,
  hookGroupId: HOOK_GROUP_ID,
  hookId: HOOK_ID,
  token: TRIGGER_TOKEN,
};
