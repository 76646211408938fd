import { declare } from '../../api/endpoint.js';
import { TASK_BODY_LIMIT } from '../../api/bodyLimits.js';
import { withTransaction } from '../../db/pool.js';
import { TgsError } from '../../errors.js';
import { validateTaskDefinition } from '../definition.js';
import { createTaskScopes } from '../createTaskScopes.js';
import { createTaskInGroup } from '../createTask.js';
import { scheduleTasks } from '../scheduleTasks.js';
import { rerunTasks } from '../rerunTasks.js';
import { cancelTasks } from '../cancelTasks.js';
import { loadDefinition, loadTasks, taskStatus, type TaskRow } from '../taskRow.js';
import type { ApiDeps } from '../../api/deps.js';
import { statusResponse } from './schemas.js';

async function mustLoad(deps: ApiDeps, taskId: string): Promise<TaskRow> {
  const [row] = await loadTasks(deps.pool, [taskId]);
  if (!row) throw new TgsError('ResourceNotFound', `task ${taskId} not found`);
  return row;
}

export const createTask = declare({
  service: 'queue',
  name: 'createTask',
  title: 'Create New Task',
  description:
    'Create a task (the Taskcluster definition plus an optional `routing`, docs/formats.md § Task definition). Idempotent: the same definition again answers with its status; a different one is a 409. A task with dependencies stays unscheduled until its task group\'s workflow schedules it. A task group that is a task-graph also needs `scheduler:extend-task-graph:<taskGroupId>` (the task joins the graph); a finished or canceled graph takes no new task (409).',
  method: 'put',
  route: '/task/<taskId>',
  scopes: { AllOf: [{ for: 'scope', in: 'scopes', each: '<scope>' }, { for: 'route', in: 'routes', each: 'queue:route:<route>' }, 'queue:scheduler-id:<schedulerId>', 'queue:create-task:<priority>:<provisionerId>/<workerType>'] },
  input: { type: 'object' },
  output: statusResponse,
  bodyLimit: TASK_BODY_LIMIT,
  async handler(ctx) {
    const { params, body, deps, authorizeExpression } = ctx;
    const result = validateTaskDefinition(body, params.taskId, new Date());
    if ('errors' in result) throw new TgsError('InputValidationError', `Invalid task definition:\n${result.errors.join('\n')}`);
    authorizeExpression(createTaskScopes(result.definition));
    const { status, committed } = await withTransaction(deps.pool, (client) =>
      createTaskInGroup(client, deps.config, deps.taskGroups, { taskId: params.taskId, definition: result.definition }, ctx),
    );
    await committed();
    deps.workers.queueSeen(`${result.definition.provisionerId}/${result.definition.workerType}`);
    return { status };
  },
});

export const getTask = declare({
  service: 'queue',
  name: 'task',
  title: 'Get Task Definition',
  description: 'The task definition as stored (defaults filled in).',
  method: 'get',
  route: '/task/<taskId>',
  scopes: 'queue:get-task:<taskId>',
  async handler({ params, deps }) {
    const definition = await loadDefinition(deps.pool, params.taskId);
    if (!definition) throw new TgsError('ResourceNotFound', `task ${params.taskId} not found`);
    return definition;
  },
});

export const getStatus = declare({
  service: 'queue',
  name: 'status',
  title: 'Get Task Status',
  description: 'The task status structure.',
  method: 'get',
  route: '/task/<taskId>/status',
  scopes: 'queue:status:<taskId>',
  output: statusResponse,
  async handler({ params, deps }) {
    return { status: taskStatus(await mustLoad(deps, params.taskId)) };
  },
});

function taskAction(name: string, verb: 'schedule' | 'rerun' | 'cancel', scope: string, description: string) {
  return declare({
    service: 'queue',
    name,
    title: `${verb[0].toUpperCase()}${verb.slice(1)} Task`,
    description,
    method: 'post',
    route: `/task/<taskId>/${verb}`,
    scopes: `${scope}:<schedulerId>/<taskGroupId>/<taskId>`,
    output: statusResponse,
    async handler({ params, deps, authorize }) {
      const row = await mustLoad(deps, params.taskId);
      authorize({ schedulerId: row.scheduler_id, taskGroupId: row.task_group_id });
      const [status] = await withTransaction(deps.pool, (client) =>
        verb === 'schedule'
          ? scheduleTasks(client, deps.config, [params.taskId])
          : verb === 'rerun'
            ? rerunTasks(client, deps.config, [params.taskId], { strict: true })
            : cancelTasks(client, deps.config, [params.taskId]),
      );
      return { status };
    },
  });
}

export const scheduleTask = taskAction('scheduleTask', 'schedule', 'queue:schedule-task', 'Schedule an unscheduled task now, whatever its dependencies; other tasks are left as they are.');
export const rerunTask = taskAction('rerunTask', 'rerun', 'queue:rerun-task', 'Add a new run to a resolved task (at most 50 runs, not past its deadline); pending and running tasks are left alone.');
export const cancelTask = taskAction('cancelTask', 'cancel', 'queue:cancel-task', 'Resolve an unresolved task as exception/canceled.');
