import { TASK_BODY_LIMIT } from '../../api/bodyLimits.js';
import { declare } from '../../api/endpoint.js';
import { createTaskGraph } from '../createTaskGraph.js';
import { taskGraphSchema } from '../graphSchema.js';
import { startGraphWorkflow } from '../startWorkflow.js';
import { graphTasksReply, taskGraphResponseSchema } from './shapes.js';

export const createTaskGraphEndpoint = declare({
  service: 'scheduler',
  name: 'createTaskGraph',
  title: 'Create Task-Graph',
  description: [
    'Create a task-graph (the task-graph format of docs/formats.md): every task gets a taskId and the graph becomes the durable',
    'workflow `task-graph/<taskGraphId>`. Idempotent: the same graph again returns the same taskIds; a',
    'different graph under the same id is a 409. An invalid graph is one 400 naming every offending label.',
    'Needs scheduler:create-task-graph and, for every task, the scopes createTask would demand.',
    'The body is read as it arrives and its tasks written in chunks inside one transaction (send `tasks` last);',
    'anything refused rolls it all back.',
  ].join(' '),
  method: 'put',
  route: '/task-graph/<taskGraphId>',
  scopes: { AllOf: ['scheduler:create-task-graph', { for: 'scope', in: 'taskScopes', each: '<scope>' }] },
  input: taskGraphSchema,
  output: taskGraphResponseSchema,
  bodyLimit: (config) => config.maxGraphBytes,
  streamJson: { expand: ['tasks'], maxMemberBytes: TASK_BODY_LIMIT },
  concurrency: 'graphSubmits',
  async handler({ params, body, deps, authorizeExpression, auth }) {
    const result = await createTaskGraph(deps, params.taskGraphId, body, { authorize: authorizeExpression, submittedBy: auth.clientId });
    await startGraphWorkflow(deps.temporal, deps.config, deps.pool, {
      taskGraphId: params.taskGraphId,
      routing: result.graph.routing,
      taskCount: result.graph.task_count,
      name: result.graph.metadata.name,
    });
    return graphTasksReply(result.graph, result.tasks);
  },
});
