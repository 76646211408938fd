import type pg from 'pg';
import type { Config } from '../config.js';
import type { Logger } from '../log.js';
import { LazyTemporalClient } from '../temporal/connection.js';
import { fireHook } from '../hooks/fire.js';
import { getHook, getLastFire } from '../hooks/store.js';
import { fireIdKey, scheduledTaskId } from '../hooks/fireTaskId.js';
import type { HookFireResult } from '../workflows/hookFireContract.js';

/** The activity of a hook's scheduled fire (src/workflows/hookFire.ts). */
export function hookActivities(deps: { config: Config; pool: pg.Pool; log?: Logger }) {
  // connected only when a hook's task joins a task-graph and the graph's workflow is told
  const temporal = new LazyTemporalClient(deps.config);
  return {
    /**
     * Renders and creates the hook's task for this schedule time, as triggerHook does, with the taskId derived from
     * the hook and the time. Idempotent: a fire already recorded for that taskId (the task and its fire commit
     * together) is answered as it was, so a retry after a worker died creates and records nothing. A refusal (scopes,
     * template) is recorded as an error fire and is not retried; an unreachable Postgres throws and is retried.
     */
    async fireScheduledHook(input: { hookGroupId: string; hookId: string; scheduledAt: string }): Promise<HookFireResult> {
      const hook = await getHook(deps.pool, input.hookGroupId, input.hookId);
      if (!hook) {
        deps.log?.warn({ hookGroupId: input.hookGroupId, hookId: input.hookId }, 'hook schedule fired for a hook that no longer exists; its schedule is deleted at the next reconciliation');
        return { result: 'no-hook' };
      }
      const now = new Date(input.scheduledAt);
      const taskId = scheduledTaskId(await fireIdKey(deps.pool), hook.hookGroupId, hook.hookId, now);
      const recorded = await getLastFire(deps.pool, hook.hookGroupId, hook.hookId, taskId);
      if (recorded) return recorded.result === 'success' ? { result: 'created', taskId } : { result: 'refused', taskId, error: recorded.error };
      const outcome = await fireHook({ ...deps, temporal }, hook, { firedBy: 'schedule' }, { taskId, now, firedAt: new Date() });
      if (outcome.result === 'refused') {
        deps.log?.warn({ hookGroupId: hook.hookGroupId, hookId: hook.hookId, taskId, err: outcome.error.message }, 'scheduled hook fire refused; recorded in its last fires');
        return { result: 'refused', taskId, error: outcome.error.message };
      }
      return outcome.result === 'created' ? { result: 'created', taskId } : { result: outcome.result };
    },
  };
}
