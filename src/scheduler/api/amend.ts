import { declare } from '../../api/endpoint.js';
import { TgsError } from '../../errors.js';
import { amendTaskGraph } from '../amendTaskGraph.js';
import { amendWorkflow } from '../amendWorkflow.js';
import { amendUpdate } from '../../workflows/contract.js';

const labels = { type: 'array', items: { type: 'string' } };

export const amendEndpoint = declare({
  service: 'scheduler',
  name: 'amendTaskGraph',
  title: 'Amend Task-Graph (tgs extension)',
  description: [
    'Take the whole edited graph file and rerun exactly what changed (docs/formats.md § Amend): each label is `unchanged`,',
    '`metadata` (deadline, expires, priority, routes, tags or metadata only: patched in place), `changed` (a new task; the old',
    'one canceled if unresolved), `added`, `removed` (canceled if unresolved) or `dependent` (depends on a changed label: a new',
    'task). Works on a running, blocked or finished graph (a finished one runs again). `?dryRun=true` checks and classifies',
    `without writing. The workflow hears it through the update \`${amendUpdate.name}\`. 400 naming the labels for an invalid`,
    'result (unknown requires, cycle, invalid node); 403 for a scope the new tasks need; 409 for a canceled graph.',
  ].join(' '),
  method: 'put',
  route: '/task-graph/<taskGraphId>/amend',
  query: { dryRun: /^(true|false)$/ },
  scopes: 'scheduler:amend-task-graph:<taskGraphId>',
  input: { type: 'object', required: ['tasks'], properties: { tasks: { type: 'object' } } },
  output: {
    type: 'object',
    additionalProperties: false,
    required: ['taskGraphId', 'dryRun', 'state', 'classification', 'tasks', 'mayBeKept', 'workflow'],
    properties: {
      taskGraphId: { type: 'string' },
      dryRun: { type: 'boolean' },
      amend: { type: 'integer' },
      state: { type: 'string' },
      classification: {
        type: 'object',
        additionalProperties: false,
        properties: { changed: labels, metadata: labels, added: labels, dependent: labels, removed: labels, unchanged: { type: 'integer' } },
      },
      tasks: { type: 'array', items: { type: 'object', properties: { label: { type: 'string' }, taskId: { type: 'string' } } } },
      mayBeKept: labels,
      workflow: { enum: ['updated', 'started', 'unchanged', 'not-running', 'dry-run'] },
    },
  },
  bodyLimit: (config) => config.maxGraphBytes,
  concurrency: 'graphSubmits',
  async handler({ params, query, body, deps, auth, authorizeExpression }) {
    const dryRun = query.dryRun === 'true';
    const result = await amendTaskGraph(deps, params.taskGraphId, body, { authorize: authorizeExpression, who: auth.clientId ?? 'an anonymous caller', dryRun });
    let workflow: Awaited<ReturnType<typeof amendWorkflow>> | 'dry-run' = 'dry-run';
    if (!dryRun) {
      try {
        workflow = await amendWorkflow(deps, result);
      } catch (err) {
        throw new TgsError(
          'ServiceUnavailable',
          `task-graph ${params.taskGraphId}: amend #${result.seq} is stored, but its workflow could not be told (${(err as Error).message}). ` +
            'Send the same amend again once Temporal answers: it changes nothing more and tells the workflow again.',
        );
      }
    }
    return {
      taskGraphId: params.taskGraphId,
      dryRun,
      ...(result.seq !== undefined ? { amend: result.seq } : {}),
      state: result.graph.state,
      classification: result.summary,
      tasks: result.tasks,
      mayBeKept: result.mayBeKept,
      workflow,
    };
  },
});
