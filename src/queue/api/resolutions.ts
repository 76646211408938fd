import { declare, type JsonSchema } from '../../api/endpoint.js';
import { SLUGID_PATTERN } from '../../api/patterns.js';
import { resolveRuns, type Resolution, type ResolutionResult } from '../resolveTask.js';
import { EXCEPTION_REASONS } from '../run.js';
import { logResolved, type LineLog } from '../auditLines.js';
import { taskStatusSchema } from './schemas.js';
import { runClaimants } from '../taskRow.js';
import type { Queryable } from '../../db/pool.js';
import type { ScopeExpression } from '../../auth/scopes.js';

/**
 * The most runs one reportResolutions call resolves. A worker's capacity is at most 32 (claimWork's `tasks`);
 * 100 leaves room for a process that reports for several workers, and keeps the batch's one statement and its
 * answer small.
 */
export const MAX_RESOLUTIONS = 100;

/** An object with exactly these properties, the `required` ones required. */
const closed = (required: string[], properties: Record<string, JsonSchema>): JsonSchema => ({ type: 'object', additionalProperties: false, required, properties });

const item = (outcome: JsonSchema, reason?: JsonSchema): JsonSchema =>
  closed(['taskId', 'runId', 'outcome', ...(reason ? ['reason'] : [])], {
    taskId: { type: 'string', pattern: SLUGID_PATTERN },
    // the routes' runId: one or two digits
    runId: { type: 'integer', minimum: 0, maximum: 99 },
    outcome,
    ...(reason ? { reason } : {}),
  });

/** The runs of a batch of reports: reportResolutions' `resolutions`, and a worker stream's `resolve` frame's. */
export const resolutionsSchema: JsonSchema = {
  type: 'array',
  minItems: 1,
  maxItems: MAX_RESOLUTIONS,
  items: { oneOf: [item({ enum: ['completed', 'failed'] }), item({ const: 'exception' }, { enum: [...EXCEPTION_REASONS] })] },
};

/**
 * What a batch of reports needs: per item `queue:resolve-task:<taskId>/<runId>`, or `queue:worker-id:` of the
 * worker that claimed that run. The claimants are read only for the items the caller's scopes do not cover
 * already (a least-privilege worker's).
 */
export async function resolutionsScopes(db: Queryable, resolutions: Resolution[], satisfies: (scope: string) => boolean): Promise<ScopeExpression> {
  const resolveScope = (r: Resolution) => `queue:resolve-task:${r.taskId}/${r.runId}`;
  const uncovered = resolutions.filter((r) => !satisfies(resolveScope(r)));
  const claimants = uncovered.length > 0 ? await runClaimants(db, uncovered) : new Map<string, string>();
  return {
    AllOf: resolutions.map((r) => {
      const claimant = claimants.get(`${r.taskId}/${r.runId}`);
      return claimant === undefined ? resolveScope(r) : { AnyOf: [resolveScope(r), `queue:worker-id:${claimant}`] };
    }),
  };
}

const answered = { taskId: { type: 'string' }, runId: { type: 'integer' } };
const error = closed(['code', 'message'], { code: { type: 'string' }, message: { type: 'string' } });

/**
 * A tgs extension: many reportCompleted / reportFailed / reportException in one request. A worker with
 * capacity reports several runs at about the same time, and each report is otherwise its own signed request.
 */
export const reportResolutions = declare<{ resolutions: Resolution[] }>({
  service: 'queue',
  name: 'reportResolutions',
  title: 'Report Resolutions (tgs extension)',
  description:
    `Resolve up to ${MAX_RESOLUTIONS} runs in one call, each exactly as reportCompleted, reportFailed or ` +
    'reportException would (same checks, same idempotency when repeated, same messages), in the order given. ' +
    'Each item needs the single reports\' scope `queue:resolve-task:<taskId>/<runId>`, or ' +
    '`queue:worker-id:<workerGroup>/<workerId>` of the worker that claimed that run (which could report it anyway, with ' +
    'the credentials its claim handed out); an item with neither refuses the whole call (403) before anything is ' +
    'resolved. The answer has one entry per item, in order: `{taskId, runId, status}`, or ' +
    '`{taskId, runId, error: {code, message}}` for an item the single report would refuse (404 ResourceNotFound, ' +
    '409 RequestConflict; InternalServerError when its task kept changing: report it again). A server without ' +
    'this endpoint answers 404: report each run with the single calls.',
  method: 'post',
  route: '/task-resolutions',
  scopes: { for: 'run', in: 'runs', each: 'queue:resolve-task:<run>' },
  input: closed(['resolutions'], { resolutions: resolutionsSchema }),
  output: closed(['resolutions'], {
    resolutions: {
      type: 'array',
      items: {
        oneOf: [closed(['taskId', 'runId', 'status'], { ...answered, status: taskStatusSchema }), closed(['taskId', 'runId', 'error'], { ...answered, error })],
      },
    },
  }),
  async handler({ body, deps, satisfies, authorizeExpression, request }) {
    authorizeExpression(await resolutionsScopes(deps.pool, body.resolutions, satisfies));
    const results = await resolveRuns(deps.pool, deps.config, deps.groupAnnouncer, body.resolutions);
    logResolutions(request.log, body.resolutions, results);
    return { resolutions: results };
  },
});

/** One `tasks <outcome>` line for the runs a batch resolved with each outcome (auditLines.ts). */
export function logResolutions(log: LineLog, resolutions: Resolution[], results: ResolutionResult[]): void {
  logResolved(
    log,
    results.flatMap((result, i) =>
      'status' in result ? [{ taskId: result.taskId, runId: result.runId, taskGroupId: result.status.taskGroupId, outcome: resolutions[i].outcome, reason: resolutions[i].reason }] : [],
    ),
  );
}
