import type pg from 'pg';
import type { Config } from '../config.js';
import type { LazyTemporalClient } from '../temporal/connection.js';
import { withTransaction } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { expandWithStoredRoles } from '../auth/roleStore.js';
import { expressionSatisfied, formatExpression, unsatisfiedPart, type ScopeExpression } from '../auth/scopes.js';
import { validateTaskDefinition } from '../queue/definition.js';
import { createTaskScopes } from '../queue/createTaskScopes.js';
import { createTaskInGroup } from '../queue/createTask.js';
import { requireScopes } from '../auth/requireScopes.js';
import { graphTaskGroups } from '../scheduler/graphGroup.js';
import { createTaskGraph } from '../scheduler/createTaskGraph.js';
import { startGraphWorkflow } from '../scheduler/startWorkflow.js';
import { isGraph, renderHookTask, type FireContext } from './render.js';
import { RenderBusyError } from './boundedJsone.js';
import { getHook, recordLastFire, type FiredBy, type HookDefinition } from './store.js';

/** What firing needs: the API process and the scheduler worker each have these. */
export interface FireEnv {
  pool: pg.Pool;
  config: Config;
  temporal: LazyTemporalClient;
}

export type FireOutcome =
  /** the template rendered to nothing: no task, no fire recorded (Taskcluster) */
  | { result: 'declined' }
  | { result: 'created'; taskId: string }
  /** no task: the error as a caller of triggerHook sees it, also recorded in the hook's last fires */
  | { result: 'refused'; taskId: string; error: TgsError }
  /** the hook was removed before the fire could take its row */
  | { result: 'no-hook' };

/** The role whose scopes a hook's tasks are created with (Taskcluster's `hook-id:<hookGroupId>/<hookId>`). */
export const hookRole = (hook: { hookGroupId: string; hookId: string }) => `hook-id:${hook.hookGroupId}/${hook.hookId}`;

/**
 * Fires a hook: renders its task template (src/hooks/render.ts) and creates the task with the scopes of the role
 * `hook-id:<hookGroupId>/<hookId>` and nothing else — the caller's own scopes play no part, as in Taskcluster, where
 * the hooks service calls createTask with `authorizedScopes: ['assume:hook-id:…']`. The scope check is createTask's
 * own (createTaskScopes, and a task-graph group's extend scope), against the role expanded through the roles as they
 * are in Postgres now. The task and its `success` fire commit together; a refusal (template error, invalid task,
 * missing scopes, a conflicting task) is recorded as an `error` fire, keyed by its taskId: a second fire of the same
 * taskId records nothing new (a scheduled fire's activity looks for its recorded fire before it renders, so a retry
 * answers what the first attempt did). Anything else (Postgres down) throws and records nothing, so the caller may
 * retry. A fire's `taskCreateTime` is the time it stands for (`now`).
 */
export async function fireHook(
  env: FireEnv,
  hook: HookDefinition,
  context: FireContext & { firedBy: FiredBy },
  options: { taskId: string; now: Date; firedAt?: Date },
): Promise<FireOutcome> {
  const { taskId, now } = options;
  const firedAt = options.firedAt ?? now;
  const role = hookRole(hook);
  const refuse = async (error: TgsError): Promise<FireOutcome> => {
    const recorded = JSON.stringify({ code: error.code, statusCode: error.status, message: error.message }, null, 2);
    await recordLastFire(env.pool, { hookGroupId: hook.hookGroupId, hookId: hook.hookId, taskId, firedBy: context.firedBy, taskCreateTime: now, result: 'error', error: recorded });
    return { result: 'refused', taskId, error };
  };

  let task: Record<string, unknown> | undefined;
  try {
    task = await renderHookTask(hook.task, context, taskId, { now, firedAt }, `${hook.hookGroupId}/${hook.hookId}`);
  } catch (err) {
    // the renderers are full: nothing recorded; a trigger answers 429, a schedule's activity or a message retries
    if (err instanceof RenderBusyError) throw new TgsError('TooManyRequests', `The hook's renders are queued full: ${err.message}; try again in a moment`);
    return refuse(new TgsError('InputError', `While firing hook:\n\n${String(err)}`));
  }
  if (!task) return { result: 'declined' };
  const scopes = await expandWithStoredRoles(env.pool, [`assume:${role}`]);
  const success = { hookGroupId: hook.hookGroupId, hookId: hook.hookId, taskId, firedBy: context.firedBy, taskCreateTime: now, result: 'success' as const, error: '' };
  if (isGraph(task)) {
    let stored: 'created' | 'exists';
    try {
      stored = await fireGraph(env, task, { role, scopes }, taskId, async (client) => {
        // as for a task: the hook's row held against a concurrent removeHook, and the fire recorded with the graph
        if (!(await getHook(client, hook.hookGroupId, hook.hookId, true))) throw new HookRemoved();
        await recordLastFire(client, success);
      });
    } catch (err) {
      if (err instanceof HookRemoved) return { result: 'no-hook' };
      if (!(err instanceof TgsError)) throw err;
      return refuse(asFireError(role, err, 'createTaskGraph', 'task-graph'));
    }
    if (stored === 'exists') await recordLastFire(env.pool, success);
    return { result: 'created', taskId };
  }
  const validated = validateTaskDefinition(task, taskId, firedAt);
  if ('errors' in validated) {
    return refuse(new TgsError('InputError', `While calling createTask: InputValidationError\n\nInvalid task definition:\n${validated.errors.join('\n')}`));
  }
  const definition = validated.definition;
  const missing = unsatisfiedPart(scopes, createTaskScopes(definition));
  if (missing !== undefined) {
    return refuse(insufficient(role, `createTask needs ${formatExpression(missing)}`));
  }
  // the createTask transaction, as the role: a task-graph group's rules apply to it as to any caller
  const asRole = {
    auth: { clientId: role, scopes },
    satisfies: (expr: ScopeExpression) => expressionSatisfied(scopes, expr),
    authorizeExpression: (expr: ScopeExpression) => {
      const part = unsatisfiedPart(scopes, expr);
      if (part !== undefined) throw insufficient(role, `createTask needs ${formatExpression(part)}`);
    },
  };
  let outcome: { committed: () => Promise<void> } | 'no-hook';
  try {
    outcome = await withTransaction(env.pool, async (client) => {
      // the hook's row held against a concurrent removeHook, whose cascade would otherwise miss this fire
      if (!(await getHook(client, hook.hookGroupId, hook.hookId, true))) return 'no-hook' as const;
      const { committed } = await createTaskInGroup(client, env.config, graphTaskGroups(env.temporal), { taskId, definition }, asRole);
      await recordLastFire(client, success);
      return { committed };
    });
  } catch (err) {
    if (!(err instanceof TgsError)) throw err;
    return refuse(asFireError(role, err, 'createTask'));
  }
  if (outcome === 'no-hook') return { result: 'no-hook' };
  await outcome.committed();
  return { result: 'created', taskId };
}

/** A refusal as triggerHook answers it (Taskcluster): 403 naming the role when scopes lack, else 400 naming the call. */
function asFireError(role: string, err: TgsError, call: string, what = 'task'): TgsError {
  if (err.code === 'InsufficientScopes' || err.code === 'AuthenticationFailed') {
    return err.message.startsWith('The role') ? err : insufficient(role, err.message, what);
  }
  return new TgsError('InputError', `While calling ${call}: ${err.code}\n\n${err.message}`);
}

const insufficient = (role: string, detail: string, what = 'task') =>
  new TgsError('InsufficientScopes', `The role \`${role}\` does not have sufficient scopes to create the ${what}:\n\n${detail}`);

/** The hook was removed while its graph was being created: nothing is stored. */
class HookRemoved extends Error {}

/**
 * Fires a hook whose template renders a task-graph (docs/formats.md § Hooks, tgs's extension): the graph is created
 * as createTaskGraph creates it, acting as the role `hook-id:<hookGroupId>/<hookId>` with its expanded `scopes` (so the
 * role needs `scheduler:create-task-graph` and createTask's scopes for every task), under the fire's taskId as its
 * taskGraphId, with `record` (the fire) in the creating transaction, and its workflow started. A graph already under
 * the id counts as this fire only when it is exactly the render (createTaskGraph answers it as not created, and the
 * caller records the fire then); any other is createTaskGraph's RequestConflict, a refused fire. Before, any graph
 * under a derived id counted, so a graph someone created under a fire's (then predictable) id was recorded as the
 * hook's success (security review 2026-11-28, finding 3). A retry after the creating transaction committed finds the
 * fire recorded and never gets here.
 */
async function fireGraph(
  env: FireEnv,
  graph: Record<string, unknown>,
  as: { role: string; scopes: string[] },
  taskGraphId: string,
  record: (client: pg.PoolClient) => Promise<void>,
): Promise<'created' | 'exists'> {
  const created = await createTaskGraph(env, taskGraphId, graph, { authorize: (expr) => requireScopes(as.role, as.scopes, expr), whenCreated: record, submittedBy: as.role });
  if (!created.created) return 'exists';
  try {
    await startGraphWorkflow(env.temporal, env.config, env.pool, {
      taskGraphId,
      routing: created.graph.routing,
      taskCount: created.graph.task_count,
      name: created.graph.metadata.name,
    });
  } catch (err) {
    // The graph is stored: the API's `missing workflows` sweep starts its workflow once Temporal answers
    // (src/scheduler/missingWorkflows.ts), so the fire stands.
    if (!(err instanceof TgsError && err.code === 'ServiceUnavailable')) throw err;
  }
  return 'created';
}
