import type pg from 'pg';
import type { AuthContext } from '../auth/authenticate.js';
import type { ScopeExpression } from '../auth/scopes.js';

/** Who creates a task, as createTask's checks see them: the caller's scopes, and how to refuse what they lack. */
export interface TaskCaller {
  auth: AuthContext;
  satisfies(expr: ScopeExpression): boolean;
  authorizeExpression(expr: ScopeExpression): void;
}

/** A task admitted into an owned group: what the owner does once the task is written, and after the commit. */
export interface GroupAdmission {
  /** In the creating transaction, after the tasks are written (a task-graph makes them its nodes). */
  joined(client: pg.PoolClient, taskIds: string[]): Promise<void>;
  /** After the commit, best effort (a task-graph's workflow is told it grew). */
  committed(): Promise<void>;
}

/**
 * The port through which the queue asks whoever owns a task group (a task-graph's scheduler) about it. The queue
 * declares it and calls it; the scheduler implements it (src/scheduler/graphGroup.ts `graphTaskGroups`), and a
 * composition root wires the two (src/processes/api.ts), so the queue never imports the scheduler.
 */
export interface TaskGroupOwner {
  /**
   * Runs in createTask's transaction before anything is written: refuses a task the group's owner does not take
   * (throws a TgsError), or answers how the task joins it; undefined for a group nobody owns (Taskcluster's rules).
   */
  admit(client: pg.PoolClient, task: { taskId: string; taskGroupId: string; scopes: readonly string[] }, caller: TaskCaller): Promise<GroupAdmission | undefined>;
  /** Asks the group's owner to look at the queue's rows again now (a lost message); answers whether it was asked. */
  reconcile(taskGroupId: string): Promise<boolean>;
}

/** A queue whose groups nobody owns: no task-graphs (tests of the queue alone). */
export const noGroupOwner: TaskGroupOwner = {
  admit: async () => undefined,
  reconcile: async () => false,
};
