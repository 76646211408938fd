import { declare } from '../../api/endpoint.js';
import { SLUGID } from '../../api/patterns.js';
import { withTransaction } from '../../db/pool.js';
import { claimWork as claimWorkLoop } from '../claimWork.js';
import { reclaimRun, resolveRun, EXCEPTION_REASONS } from '../resolveTask.js';
import { runCredentials } from '../credentials.js';
import { taskStatus } from '../taskRow.js';
import { IDENTIFIER, RUN_ID, statusResponse } from './schemas.js';

export const claimWork = declare({
  service: 'queue',
  name: 'claimWork',
  title: 'Claim Work',
  description:
    'Claim up to `tasks` pending tasks of a worker pool: highest priority first, FIFO within a priority. Long-polls up to 20 s and answers as soon as a task is claimed. Each claimed run comes with temporary credentials for reclaiming, resolving and creating artifacts.',
  method: 'post',
  route: '/claim-work/<provisionerId>/<workerType>',
  // taskcluster-client sends the taskQueueId as one %2F-encoded segment
  aliases: ['/claim-work/<taskQueueId>'],
  params: { provisionerId: IDENTIFIER, workerType: IDENTIFIER, taskQueueId: /^[a-zA-Z0-9_-]{1,38}\/[a-zA-Z0-9_-]{1,38}$/ },
  scopes: { AllOf: ['queue:claim-work:<provisionerId>/<workerType>', 'queue:worker-id:<workerGroup>/<workerId>'] },
  input: {
    type: 'object',
    additionalProperties: false,
    required: ['workerGroup', 'workerId', 'tasks'],
    properties: {
      workerGroup: { type: 'string', minLength: 1, maxLength: 38, pattern: '^[a-zA-Z0-9_-]*$' },
      workerId: { type: 'string', minLength: 1, maxLength: 38, pattern: '^[a-zA-Z0-9_-]*$' },
      tasks: { type: 'integer', minimum: 1, maximum: 32 },
    },
  },
  async handler({ params, body, deps, authorize, request }) {
    const [provisionerId, workerType] = params.taskQueueId ? params.taskQueueId.split('/') : [params.provisionerId, params.workerType];
    authorize({ provisionerId, workerType, workerGroup: body.workerGroup, workerId: body.workerId });
    const abort = new AbortController();
    request.raw.once('close', () => abort.abort());
    const tasks = await claimWorkLoop(
      deps.pool,
      deps.config,
      deps.issuer,
      deps.claimWaiter,
      { provisionerId, workerType, workerGroup: body.workerGroup, workerId: body.workerId, count: body.tasks },
      deps.config.claimWorkWaitMs,
      abort.signal,
    );
    return { tasks };
  },
});

export const reclaimTask = declare({
  service: 'queue',
  name: 'reclaimTask',
  title: 'Reclaim Task',
  description: 'Extend the claim on a running run (takenUntil only moves forward) and get fresh credentials.',
  method: 'post',
  route: '/task/<taskId>/runs/<runId>/reclaim',
  params: { taskId: SLUGID, runId: RUN_ID },
  scopes: 'queue:reclaim-task:<taskId>/<runId>',
  async handler({ params, deps }) {
    const runId = Number(params.runId);
    const { row, takenUntil } = await withTransaction(deps.pool, (client) => reclaimRun(client, deps.config, params.taskId, runId));
    const run = row.runs[runId];
    const { rows } = await deps.pool.query<{ scopes: string[] }>(`SELECT ARRAY(SELECT jsonb_array_elements_text(definition->'scopes')) AS scopes FROM tasks WHERE task_id = $1`, [params.taskId]);
    return {
      status: taskStatus(row),
      runId,
      workerGroup: run.workerGroup,
      workerId: run.workerId,
      takenUntil: takenUntil.toISOString(),
      credentials: runCredentials(deps.issuer, {
        taskId: params.taskId,
        runId,
        workerGroup: run.workerGroup as string,
        workerId: run.workerId as string,
        takenUntil,
        taskScopes: rows[0]?.scopes ?? [],
      }),
    };
  },
});

function report(name: string, outcome: 'completed' | 'failed' | 'exception', description: string) {
  return declare({
    service: 'queue',
    name,
    title: `Report ${outcome[0].toUpperCase()}${outcome.slice(1)}`,
    description,
    method: 'post',
    route: `/task/<taskId>/runs/<runId>/${outcome}`,
    params: { taskId: SLUGID, runId: RUN_ID },
    scopes: 'queue:resolve-task:<taskId>/<runId>',
    ...(outcome === 'exception'
      ? { input: { type: 'object', additionalProperties: false, required: ['reason'], properties: { reason: { enum: [...EXCEPTION_REASONS] } } } }
      : {}),
    output: statusResponse,
    async handler({ params, body, deps }) {
      const reason = outcome === 'exception' ? (body as { reason: string }).reason : undefined;
      const status = await resolveRun(deps.pool, deps.config, deps.groupAnnouncer, params.taskId, Number(params.runId), outcome, reason);
      return { status };
    },
  });
}

export const reportCompleted = report('reportCompleted', 'completed', 'Report a run completed successfully.');
export const reportFailed = report('reportFailed', 'failed', 'Report a run failed (the task ran and did not succeed).');
export const reportException = report(
  'reportException',
  'exception',
  'Report a run resolved by an exception: worker-shutdown and intermittent-task retry the task while retries are left.',
);

export const pendingTasks = declare({
  service: 'queue',
  name: 'pendingTasks',
  title: 'Get Number of Pending Tasks',
  description: 'How many tasks of a worker pool are pending.',
  method: 'get',
  route: '/pending/<provisionerId>/<workerType>',
  params: { provisionerId: IDENTIFIER, workerType: IDENTIFIER },
  async handler({ params, deps }) {
    const { rows } = await deps.pool.query<{ n: number }>(
      `SELECT count(*) AS n FROM tasks WHERE provisioner_id = $1 AND worker_type = $2 AND state = 'pending'`,
      [params.provisionerId, params.workerType],
    );
    return { provisionerId: params.provisionerId, workerType: params.workerType, pendingTasks: rows[0].n };
  },
});
