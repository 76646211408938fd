import type pg from 'pg';
import type { Config } from '../config.js';
import type { TaskDefinition } from './definition.js';
import { createTasks } from './createTasks.js';
import type { TaskStatus } from './taskRow.js';
import type { TaskCaller, TaskGroupOwner } from './taskGroupOwner.js';

/**
 * createTask's one path, for the endpoint and for hooks alike: in the caller's transaction, the group's owner admits
 * the task (src/queue/taskGroupOwner.ts), the task is written, the owner joins it. Answers the task's status and what
 * to run once the transaction has committed. The caller has checked createTaskScopes already.
 */
export async function createTaskInGroup(
  client: pg.PoolClient,
  config: Config,
  owner: TaskGroupOwner,
  task: { taskId: string; definition: TaskDefinition },
  caller: TaskCaller,
): Promise<{ status: TaskStatus; committed: () => Promise<void> }> {
  const { taskId, definition } = task;
  const admission = await owner.admit(client, { taskId, taskGroupId: definition.taskGroupId, scopes: definition.scopes }, caller);
  const [status] = await createTasks(client, config, [{ taskId, definition }]);
  if (admission) await admission.joined(client, [taskId]);
  return { status, committed: async () => admission?.committed() };
}
