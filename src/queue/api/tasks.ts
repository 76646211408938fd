import { declare } from '../../api/endpoint.js';
import { SLUGID } from '../../api/patterns.js';
import { withTransaction } from '../../db/pool.js';
import { TgsError } from '../../errors.js';
import { validateTaskDefinition } from '../definition.js';
import { createTaskScopes } from '../createTaskScopes.js';
import { createTasks } from '../createTasks.js';
import { scheduleTasks } from '../scheduleTasks.js';
import { rerunTasks } from '../rerunTasks.js';
import { cancelTasks } from '../cancelTasks.js';
import { loadTasks, taskStatus, type TaskRow } from '../taskRow.js';
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
    'Create a task (seed 001 definition, plus optional `routing`). Idempotent: the same definition again answers with its status; a different one is a 409. A task with dependencies stays unscheduled until its task group\'s workflow schedules it.',
  method: 'put',
  route: '/task/<taskId>',
  params: { taskId: SLUGID },
  scopes: { AllOf: [{ for: 'scope', in: 'scopes', each: '<scope>' }, { for: 'route', in: 'routes', each: 'queue:route:<route>' }, 'queue:scheduler-id:<schedulerId>', 'queue:create-task:<priority>:<provisionerId>/<workerType>'] },
  input: { type: 'object' },
  output: statusResponse,
  async handler({ params, body, deps, authorizeExpression }) {
    const result = validateTaskDefinition(body, params.taskId, new Date());
    if ('errors' in result) throw new TgsError('InputValidationError', `Invalid task definition:\n${result.errors.join('\n')}`);
    authorizeExpression(createTaskScopes(result.definition));
    const [status] = await withTransaction(deps.pool, (client) => createTasks(client, deps.config, [{ taskId: params.taskId, definition: result.definition }]));
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
  params: { taskId: SLUGID },
  async handler({ params, deps }) {
    const { rows } = await deps.pool.query<{ definition: Record<string, unknown> }>('SELECT definition FROM tasks WHERE task_id = $1', [params.taskId]);
    if (!rows[0]) throw new TgsError('ResourceNotFound', `task ${params.taskId} not found`);
    return rows[0].definition;
  },
});

export const getStatus = declare({
  service: 'queue',
  name: 'status',
  title: 'Get Task Status',
  description: 'The task status structure.',
  method: 'get',
  route: '/task/<taskId>/status',
  params: { taskId: SLUGID },
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
    params: { taskId: SLUGID },
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
