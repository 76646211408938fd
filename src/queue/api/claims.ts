import { declare } from '../../api/endpoint.js';
import { withTransaction } from '../../db/pool.js';
import { claimWork as claimWorkLoop, MAX_CLAIM_COUNT, recordClaims } from '../claimWork.js';
import { resolveRun } from '../resolveTask.js';
import { reclaimRun } from '../reclaimRun.js';
import { EXCEPTION_REASONS } from '../run.js';
import { runCredentials } from '../credentials.js';
import { loadTaskScopes, taskStatus } from '../taskRow.js';
import { TgsError } from '../../errors.js';
import { pendingCount, splitTaskQueueId } from '../workers.js';
import { statusResponse } from './schemas.js';

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
  scopes: { AllOf: ['queue:claim-work:<provisionerId>/<workerType>', 'queue:worker-id:<workerGroup>/<workerId>'] },
  input: {
    type: 'object',
    additionalProperties: false,
    required: ['workerGroup', 'workerId', 'tasks'],
    properties: {
      workerGroup: { type: 'string', minLength: 1, maxLength: 38, pattern: '^[a-zA-Z0-9_-]*$' },
      workerId: { type: 'string', minLength: 1, maxLength: 38, pattern: '^[a-zA-Z0-9_-]*$' },
      tasks: { type: 'integer', minimum: 1, maximum: MAX_CLAIM_COUNT },
    },
  },
  async handler({ params, body, deps, authorize, reply, request }) {
    const [provisionerId, workerType] = params.taskQueueId ? params.taskQueueId.split('/') : [params.provisionerId, params.workerType];
    authorize({ provisionerId, workerType, workerGroup: body.workerGroup, workerId: body.workerId });
    const abort = new AbortController();
    // The response closing before we answer means the worker went away. (Not the request's 'close': that
    // fires as soon as its body has been read, which may be after this line.) A response that was sent closes
    // too: no abort then (an abort builds a DOMException with its stack, 10 µs a claimWork call).
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) abort.abort();
    });
    const claim = { provisionerId, workerType, workerGroup: body.workerGroup, workerId: body.workerId, count: body.tasks };
    const tasks = await claimWorkLoop(deps.pool, deps.config, deps.issuer.current, deps.claimWaiter, claim, deps.config.claimWorkWaitMs, abort.signal);
    recordClaims(request.log, deps.workers, claim, tasks);
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
  scopes: 'queue:reclaim-task:<taskId>/<runId>',
  async handler({ params, deps }) {
    const runId = Number(params.runId);
    const { row, takenUntil } = await withTransaction(deps.pool, (client) => reclaimRun(client, deps.config, params.taskId, runId));
    const run = row.runs[runId];
    const taskScopes = await loadTaskScopes(deps.pool, params.taskId);
    return {
      status: taskStatus(row),
      runId,
      workerGroup: run.workerGroup,
      workerId: run.workerId,
      takenUntil: takenUntil.toISOString(),
      credentials: runCredentials(deps.issuer.current, {
        taskId: params.taskId,
        runId,
        workerGroup: run.workerGroup as string,
        workerId: run.workerId as string,
        takenUntil,
        taskScopes,
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
    scopes: 'queue:resolve-task:<taskId>/<runId>',
    ...(outcome === 'exception'
      ? { input: { type: 'object', additionalProperties: false, required: ['reason'], properties: { reason: { enum: [...EXCEPTION_REASONS] } } } }
      : {}),
    output: statusResponse,
    async handler({ params, body, deps, request }) {
      const reason = outcome === 'exception' ? (body as { reason: string }).reason : undefined;
      // the line is the report statement's, shared by the reports written with this one: the server's log, with reqIds
      const audit = { log: request.server.log, reqId: String(request.id) };
      const status = await resolveRun(deps.pool, deps.config, deps.groupAnnouncer, params.taskId, Number(params.runId), outcome, reason, audit);
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
  description: 'How many tasks of a task queue are pending (exact: a count of the pending rows).',
  method: 'get',
  route: '/pending/<taskQueueId>',
  // the form before task queues; the client sends the taskQueueId as one %2F-encoded segment
  aliases: ['/pending/<provisionerId>/<workerType>'],
  // `<provisionerId>/<workerType>` is `<taskQueueId>`, whichever form the request used
  scopes: 'queue:pending-count:<provisionerId>/<workerType>',
  output: {
    type: 'object',
    additionalProperties: false,
    required: ['provisionerId', 'workerType', 'taskQueueId', 'pendingTasks'],
    properties: { provisionerId: { type: 'string' }, workerType: { type: 'string' }, taskQueueId: { type: 'string' }, pendingTasks: { type: 'integer', minimum: 0 } },
  },
  async handler({ params, deps, authorize }) {
    const taskQueueId = params.taskQueueId ?? `${params.provisionerId}/${params.workerType}`;
    const [provisionerId, workerType] = splitTaskQueueId(taskQueueId);
    authorize({ provisionerId, workerType });
    return { provisionerId, workerType, taskQueueId, pendingTasks: await pendingCount(deps.pool, taskQueueId) };
  },
});

export const claimTask = declare({
  service: 'queue',
  name: 'claimTask',
  title: 'Claim Task (deprecated)',
  description:
    'Taskcluster\'s deprecated, never documented claim of one given run. tgs does not serve it: workers call ' +
    '`claimWork`. Every request gets 400 InputError saying so, whatever its body or credentials.',
  method: 'post',
  route: '/task/<taskId>/runs/<runId>/claim',
  input: { type: 'object' },
  async handler() {
    throw new TgsError(
      'InputError',
      'queue.claimTask is deprecated (Taskcluster never documented it) and tgs does not serve it: claim work with ' +
        'queue.claimWork(taskQueueId, {workerGroup, workerId, tasks}).',
    );
  },
});
