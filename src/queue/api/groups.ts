import { declare } from '../../api/endpoint.js';
import { PAGE_QUERY, readPage } from '../../api/paging.js';
import { withTransaction, type Queryable } from '../../db/pool.js';
import { TgsError } from '../../errors.js';
import { cancelTasks } from '../cancelTasks.js';
import { getTaskGroup as getTaskGroupRow, sealTaskGroup as sealTaskGroupRow, type TaskGroupRow } from '../taskGroups.js';
import {
  countGroupTasks,
  listDependentTasks as listDependentTaskRows,
  listGroupTasks,
  taskExists,
  taskStatus,
  unresolvedTaskIds,
  type TaskWithDefinition,
} from '../taskRow.js';

async function group(db: Queryable, taskGroupId: string): Promise<TaskGroupRow> {
  const found = await getTaskGroupRow(db, taskGroupId);
  if (!found) throw new TgsError('ResourceNotFound', `task group ${taskGroupId} not found`);
  return found;
}

/** The group, once the caller's scopes for its schedulerId are checked: a caller without them learns nothing of its state. */
async function authorizedGroup(db: Queryable, taskGroupId: string, authorize: (params: { schedulerId: string }) => void): Promise<TaskGroupRow> {
  const g = await group(db, taskGroupId);
  authorize({ schedulerId: g.scheduler_id });
  return g;
}

const groupInfo = (g: TaskGroupRow) => ({
  taskGroupId: g.task_group_id,
  schedulerId: g.scheduler_id,
  expires: g.expires.toISOString(),
  ...(g.sealed ? { sealed: g.sealed.toISOString() } : {}),
});

/** A page of tasks as Taskcluster lists them: each with its status and definition, paged by taskId. */
async function taskPage(query: Record<string, string | undefined>, fetch: (after: string, limit: number) => Promise<TaskWithDefinition[]>) {
  const { page, next } = await readPage(query, fetch, (r) => r.task_id);
  return { tasks: page.map((r) => ({ status: taskStatus(r), task: r.definition })), ...next };
}

export const listTaskGroup = declare({
  service: 'queue',
  name: 'listTaskGroup',
  title: 'List Task Group',
  description: 'The tasks of a group with their status, paged (limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/task-group/<taskGroupId>/list',
  scopes: 'queue:list-task-group:<taskGroupId>',
  query: PAGE_QUERY,
  async handler({ params, query, deps }) {
    const g = await group(deps.pool, params.taskGroupId);
    return { ...groupInfo(g), ...(await taskPage(query, (after, limit) => listGroupTasks(deps.pool, params.taskGroupId, after, limit))) };
  },
});

export const getTaskGroup = declare({
  service: 'queue',
  name: 'getTaskGroup',
  title: 'Get Task Group',
  description: 'A task group: schedulerId, expires, and when it was sealed.',
  method: 'get',
  route: '/task-group/<taskGroupId>',
  scopes: 'queue:list-task-group:<taskGroupId>',
  async handler({ params, deps }) {
    return groupInfo(await group(deps.pool, params.taskGroupId));
  },
});

export const sealTaskGroup = declare({
  service: 'queue',
  name: 'sealTaskGroup',
  title: 'Seal Task Group',
  description: 'A sealed task group accepts no new tasks.',
  method: 'post',
  route: '/task-group/<taskGroupId>/seal',
  scopes: 'queue:seal-task-group:<schedulerId>/<taskGroupId>',
  async handler({ params, deps, authorize }) {
    await authorizedGroup(deps.pool, params.taskGroupId, authorize);
    await sealTaskGroupRow(deps.pool, params.taskGroupId);
    return groupInfo(await group(deps.pool, params.taskGroupId));
  },
});

export const cancelTaskGroup = declare({
  service: 'queue',
  name: 'cancelTaskGroup',
  title: 'Cancel Task Group',
  description:
    'Cancel every unresolved task of the group (they resolve as exception/canceled). As in Taskcluster, only a ' +
    'sealed group can be canceled (409 otherwise), so no task can join it afterwards.',
  method: 'post',
  route: '/task-group/<taskGroupId>/cancel',
  scopes: 'queue:cancel-task-group:<schedulerId>/<taskGroupId>',
  async handler({ params, deps, authorize }) {
    const g = await authorizedGroup(deps.pool, params.taskGroupId, authorize);
    if (!g.sealed) throw new TgsError('RequestConflict', `task group ${params.taskGroupId} is not sealed: seal it (sealTaskGroup) before canceling it`);
    const ids = await unresolvedTaskIds(deps.pool, params.taskGroupId);
    for (let i = 0; i < ids.length; i += 2000) {
      await withTransaction(deps.pool, (client) => cancelTasks(client, deps.config, ids.slice(i, i + 2000)));
    }
    const taskGroupSize = await countGroupTasks(deps.pool, params.taskGroupId);
    // Taskcluster's cancel-task-group-response
    return { taskGroupId: params.taskGroupId, taskGroupSize, cancelledCount: ids.length, taskIds: ids };
  },
});

export const listDependentTasks = declare({
  service: 'queue',
  name: 'listDependentTasks',
  title: 'List Dependent Tasks',
  description: 'Tasks that depend on this task, with their status, paged.',
  method: 'get',
  route: '/task/<taskId>/dependents',
  scopes: 'queue:list-dependent-tasks:<taskId>',
  query: PAGE_QUERY,
  async handler({ params, query, deps }) {
    if (!(await taskExists(deps.pool, params.taskId))) throw new TgsError('ResourceNotFound', `task ${params.taskId} not found`);
    return { taskId: params.taskId, ...(await taskPage(query, (after, limit) => listDependentTaskRows(deps.pool, params.taskId, after, limit))) };
  },
});
