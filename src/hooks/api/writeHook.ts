import type pg from 'pg';
import type { ApiDeps } from '../../api/deps.js';
import { notifyAfterCommit, withTransaction } from '../../db/pool.js';
import { TgsError } from '../../errors.js';
import { applyHookSchedule } from '../schedules.js';
import { HOOK_BINDINGS_CHANNEL } from '../listenerBindings.js';
import { lockForHookWrite } from '../scheduleLock.js';
import type { HookDefinition, SchedulePolicy } from '../store.js';

/** The columns' defaults (migration 025): what a new hook's schedule runs with. */
export const DEFAULT_POLICY: SchedulePolicy = { paused: false, overlap: 'ALLOW_ALL', catchupWindowSeconds: 86400 };

export const noSuchHook = (params: { hookGroupId?: string; hookId?: string }) =>
  new TgsError('ResourceNotFound', `No such hook: ${params.hookGroupId}/${params.hookId} (create it with createHook)`, { hookGroupId: params.hookGroupId, hookId: params.hookId });

/**
 * Writes a hook's row and its Temporal Schedule together (and tells the hook listener, which binds its queue anew): the schedule is written inside the row's transaction, so
 * a schedule Temporal refuses (an unparsable pattern: 400) or cannot take (503) leaves the row as it was. A commit
 * that fails after the schedule was written leaves a schedule the scheduler worker's reconciliation corrects.
 */
export async function writeHook<T>(
  deps: ApiDeps,
  write: (client: pg.PoolClient) => Promise<T>,
  schedule: (result: T) => (HookDefinition & { policy: SchedulePolicy; previousSchedule?: string[] }) | undefined,
): Promise<T> {
  return withTransaction(deps.pool, async (client) => {
    await lockForHookWrite(client);
    const result = await write(client);
    // the hook listener reconciles its queue's bindings when this commits (src/hooks/listener.ts)
    await notifyAfterCommit(client, HOOK_BINDINGS_CHANNEL, ['hook']);
    const hook = schedule(result);
    // a hook that had no schedule and gets none needs no Temporal: hooks fired by triggers work without it
    if (hook && (hook.schedule.length > 0 || (hook.previousSchedule?.length ?? 0) > 0)) {
      await applyHookSchedule(await temporal(deps), deps.config, { hookGroupId: hook.hookGroupId, hookId: hook.hookId, schedule: hook.schedule, policy: hook.policy });
    }
    return result;
  });
}

/** The Temporal client, or 503 naming what to do. */
export async function temporal(deps: ApiDeps) {
  try {
    return await deps.temporal.get();
  } catch (err) {
    throw new TgsError('ServiceUnavailable', `Temporal is unreachable (${(err as Error).message}); hook schedules live there, nothing was changed: try again`);
  }
}

