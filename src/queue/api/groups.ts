import { declare } from '../../api/endpoint.js';
import { SLUGID } from '../../api/patterns.js';
import { withTransaction } from '../../db/pool.js';
import { TgsError } from '../../errors.js';
import { cancelTasks } from '../cancelTasks.js';
import { taskStatus, TASK_COLUMNS, type TaskRow } from '../taskRow.js';
import { decodeToken, encodeToken, LIMIT, TOKEN } from './schemas.js';

async function group(pool: import('pg').Pool, taskGroupId: string) {
  const { rows } = await pool.query<{ task_group_id: string; scheduler_id: string; expires: Date; sealed: Date | null }>(
    'SELECT task_group_id, scheduler_id, expires, sealed FROM task_groups WHERE task_group_id = $1',
    [taskGroupId],
  );
  if (!rows[0]) throw new TgsError('ResourceNotFound', `task group ${taskGroupId} not found`);
  return rows[0];
}

const groupInfo = (g: Awaited<ReturnType<typeof group>>) => ({
  taskGroupId: g.task_group_id,
  schedulerId: g.scheduler_id,
  expires: g.expires.toISOString(),
  ...(g.sealed ? { sealed: g.sealed.toISOString() } : {}),
});

export const listTaskGroup = declare({
  service: 'queue',
  name: 'listTaskGroup',
  title: 'List Task Group',
  description: 'The tasks of a group with their status, paged (limit ≤ 1000, continuationToken).',
  method: 'get',
  route: '/task-group/<taskGroupId>/list',
  params: { taskGroupId: SLUGID },
  query: { limit: LIMIT, continuationToken: TOKEN },
  async handler({ params, query, deps }) {
    const g = await group(deps.pool, params.taskGroupId);
    const limit = Math.min(Number(query.limit ?? 1000), 1000);
    const { rows } = await deps.pool.query<TaskRow & { definition: unknown }>(
      `SELECT ${TASK_COLUMNS}, definition FROM tasks WHERE task_group_id = $1 AND task_id > $2 ORDER BY task_id LIMIT $3`,
      [params.taskGroupId, decodeToken(query.continuationToken), limit + 1],
    );
    const page = rows.slice(0, limit);
    return {
      ...groupInfo(g),
      tasks: page.map((r) => ({ status: taskStatus(r), task: r.definition })),
      ...(rows.length > limit ? { continuationToken: encodeToken(page[page.length - 1].task_id) } : {}),
    };
  },
});

export const getTaskGroup = declare({
  service: 'queue',
  name: 'getTaskGroup',
  title: 'Get Task Group',
  description: 'A task group: schedulerId, expires, and when it was sealed.',
  method: 'get',
  route: '/task-group/<taskGroupId>',
  params: { taskGroupId: SLUGID },
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
  params: { taskGroupId: SLUGID },
  scopes: 'queue:seal-task-group:<schedulerId>/<taskGroupId>',
  async handler({ params, deps, authorize }) {
    const g = await group(deps.pool, params.taskGroupId);
    authorize({ schedulerId: g.scheduler_id });
    await deps.pool.query('UPDATE task_groups SET sealed = coalesce(sealed, now()) WHERE task_group_id = $1', [params.taskGroupId]);
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
  params: { taskGroupId: SLUGID },
  scopes: 'queue:cancel-task-group:<schedulerId>/<taskGroupId>',
  async handler({ params, deps, authorize }) {
    const g = await group(deps.pool, params.taskGroupId);
    if (!g.sealed) throw new TgsError('RequestConflict', `task group ${params.taskGroupId} is not sealed: seal it (sealTaskGroup) before canceling it`);
    authorize({ schedulerId: g.scheduler_id });
    const { rows } = await deps.pool.query<{ task_id: string }>(
      `SELECT task_id FROM tasks WHERE task_group_id = $1 AND state IN ('unscheduled', 'pending', 'running')`,
      [params.taskGroupId],
    );
    const ids = rows.map((r) => r.task_id);
    for (let i = 0; i < ids.length; i += 2000) {
      await withTransaction(deps.pool, (client) => cancelTasks(client, deps.config, ids.slice(i, i + 2000)));
    }
    const size = await deps.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM tasks WHERE task_group_id = $1', [params.taskGroupId]);
    // Taskcluster's cancel-task-group-response
    return { taskGroupId: params.taskGroupId, taskGroupSize: size.rows[0].n, cancelledCount: ids.length, taskIds: ids };
  },
});

export const listDependentTasks = declare({
  service: 'queue',
  name: 'listDependentTasks',
  title: 'List Dependent Tasks',
  description: 'Tasks that depend on this task, with their status, paged.',
  method: 'get',
  route: '/task/<taskId>/dependents',
  params: { taskId: SLUGID },
  query: { limit: LIMIT, continuationToken: TOKEN },
  async handler({ params, query, deps }) {
    const limit = Math.min(Number(query.limit ?? 1000), 1000);
    const exists = await deps.pool.query('SELECT 1 FROM tasks WHERE task_id = $1', [params.taskId]);
    if (exists.rowCount === 0) throw new TgsError('ResourceNotFound', `task ${params.taskId} not found`);
    const { rows } = await deps.pool.query<TaskRow & { definition: unknown }>(
      `SELECT ${TASK_COLUMNS}, definition FROM tasks WHERE task_id IN (
         SELECT dependent_task_id FROM task_dependencies WHERE required_task_id = $1 AND dependent_task_id > $2
         ORDER BY dependent_task_id LIMIT $3)
       ORDER BY task_id`,
      [params.taskId, decodeToken(query.continuationToken), limit + 1],
    );
    const page = rows.slice(0, limit);
    return {
      taskId: params.taskId,
      tasks: page.map((r) => ({ status: taskStatus(r), task: r.definition })),
      ...(rows.length > limit ? { continuationToken: encodeToken(page[page.length - 1].task_id) } : {}),
    };
  },
});
