import { createHash } from 'node:crypto';
import { ScheduleAlreadyRunning, ScheduleNotFoundError, type Client, type ScheduleOptions } from '@temporalio/client';
import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { HOOK_FIRE_WORKFLOW, type HookFireInput } from '../workflows/hookFireContract.js';
import { listScheduledHooks, type SchedulePolicy } from './store.js';

/**
 * Each hook with a `schedule` is one Temporal Schedule (visible, pausable and backfillable in the Temporal Web UI),
 * whose action starts the `hookFire` workflow (src/workflows/hookFire.ts). The hook's row in Postgres is the truth:
 * the API writes the schedule inside the transaction that writes the row (a refused schedule writes no row), and
 * `reconcileHookSchedules` (at scheduler-worker start) creates what is missing, updates what differs and deletes
 * schedules of hooks that are gone, so a crash between the two leaves nothing lost or left over for long.
 */

const PREFIX = 'tgs-hook:';
/** Temporal refuses ids over 1000 bytes by default; longer hook ids are named by their digest. */
const MAX_READABLE_ID = 900;

/** The Temporal Schedule id of a hook: readable (`tgs-hook:<hookGroupId>/<hookId>`) where it fits. */
export function scheduleIdFor(hook: { hookGroupId: string; hookId: string }): string {
  const readable = `${PREFIX}${hook.hookGroupId}/${hook.hookId}`;
  if (Buffer.byteLength(readable) <= MAX_READABLE_ID) return readable;
  return `${PREFIX}sha256:${createHash('sha256').update(`${hook.hookGroupId}/${hook.hookId}`).digest('hex')}`;
}

/**
 * Taskcluster's patterns (cron-parser, UTC) as Temporal's: five fields are the same in both; six fields are
 * `second minute hour day month weekday` in cron-parser but `minute … year` in Temporal, so a year field (`*`) is
 * appended to make Temporal's seven-field form. Anything else (Temporal's `@every 10s`, `@daily`) is passed as is;
 * Temporal refuses what it cannot parse, and the hook is refused with its message.
 */
export function temporalCron(pattern: string): string {
  const fields = pattern.trim().split(/\s+/);
  return fields.length === 6 ? `${fields.join(' ')} *` : pattern.trim();
}

const SHORTHAND = /^@(yearly|annually|monthly|weekly|daily|hourly|every [0-9]+[smhd](\/[0-9]+[smhd])?)$/;
const FIELD = /^[0-9A-Za-z*?,/#-]+$/;

/**
 * Refuses (400) a pattern that is not shaped like a cron pattern (5 or 6 fields of cron characters, or a shorthand)
 * before anything is written or Temporal is asked; Temporal still judges the fields themselves.
 */
export function checkSchedulePatterns(patterns: string[]): void {
  for (const pattern of patterns) {
    const trimmed = pattern.trim();
    const fields = trimmed.split(/\s+/);
    if (SHORTHAND.test(trimmed) || ((fields.length === 5 || fields.length === 6) && fields.every((f) => FIELD.test(f)))) continue;
    throw new TgsError('InputError', `Invalid schedule pattern ${JSON.stringify(pattern)}: use a cron pattern of 5 fields (minute first) or 6 (second first), UTC, e.g. "0 0 3 * * *" for 03:00 every day`);
  }
}

/** A hook as its schedule needs it. */
export interface ScheduledHook {
  hookGroupId: string;
  hookId: string;
  schedule: string[];
  policy: SchedulePolicy;
}

/**
 * By default every schedule time of a hook is its own fire: a fire is one short activity, so actions overlap only
 * while no scheduler worker runs, and then each missed time still gets its task when one is back (ALLOW_ALL). After
 * an outage of Temporal itself, schedule times up to a day old are still taken, older ones dropped. Both are the
 * columns' defaults (migration 025) and can be set per hook (setHookSchedulePolicy).
 */
function scheduleOptions(config: Config, hook: ScheduledHook): Omit<ScheduleOptions, 'scheduleId'> {
  const { overlap, catchupWindowSeconds } = hook.policy;
  const args: HookFireInput = { hookGroupId: hook.hookGroupId, hookId: hook.hookId, schedule: hook.schedule, policy: { overlap, catchupWindowSeconds } };
  return {
    spec: { cronExpressions: hook.schedule.map(temporalCron) },
    action: {
      type: 'startWorkflow',
      workflowType: HOOK_FIRE_WORKFLOW,
      workflowId: `hook-fire:${scheduleIdFor(hook).slice(PREFIX.length)}`,
      taskQueue: config.temporalTaskQueue,
      // the schedule and policy ride along so reconciliation sees which definition this schedule was made from
      args: [args],
    },
    policies: { overlap, catchupWindow: catchupWindowSeconds * 1000 },
    state: { paused: hook.policy.paused },
  };
}

/** A schedule Temporal refuses (an unparsable pattern) is the caller's mistake; anything else is Temporal's. */
function asApiError(err: unknown, hook: { schedule: string[] }): Error {
  if (err instanceof TgsError) return err;
  const message = (err as Error).message ?? String(err);
  // the SDK turns the server's INVALID_ARGUMENT (a spec it cannot parse) into a TypeError carrying its details
  if (err instanceof TypeError) {
    return new TgsError('InputError', `Invalid schedule ${JSON.stringify(hook.schedule)}: Temporal says "${message}". Use cron patterns: 5 fields (minute first) or 6 (second first), UTC.`);
  }
  return new TgsError('ServiceUnavailable', `Temporal did not take the hook's schedule (${message}); nothing was changed, try again`);
}

/** Makes the hook's Temporal Schedule match its `schedule`: created, updated, or deleted when empty. */
export async function applyHookSchedule(client: Client, config: Config, hook: ScheduledHook): Promise<void> {
  const scheduleId = scheduleIdFor(hook);
  const handle = client.schedule.getHandle(scheduleId);
  try {
    if (hook.schedule.length === 0) {
      await handle.delete().catch((err: unknown) => {
        if (!(err instanceof ScheduleNotFoundError)) throw err;
      });
      return;
    }
    const options = scheduleOptions(config, hook);
    try {
      await client.schedule.create({ scheduleId, ...options });
    } catch (err) {
      if (!(err instanceof ScheduleAlreadyRunning)) throw err;
      await handle.update((previous) => ({
        ...previous,
        spec: options.spec,
        action: options.action,
        policies: { ...previous.policies, ...options.policies },
        state: { ...previous.state, paused: hook.policy.paused },
      }));
    }
  } catch (err) {
    throw asApiError(err, hook);
  }
}

/** Deletes a removed hook's schedule (none is fine). */
export async function deleteHookSchedule(client: Client, hook: { hookGroupId: string; hookId: string }): Promise<void> {
  try {
    await client.schedule.getHandle(scheduleIdFor(hook)).delete();
  } catch (err) {
    if (err instanceof ScheduleNotFoundError) return;
    throw asApiError(err, { schedule: [] });
  }
}

/**
 * Makes Temporal's hook schedules match the hooks in Postgres: each scheduled hook's schedule exists with its
 * patterns, and no `tgs-hook:` schedule is left for a hook that is gone. Returns what it changed.
 */
export async function reconcileHookSchedules(db: Queryable, client: Client, config: Config): Promise<{ created: number; updated: number; deleted: number }> {
  const wanted = new Map((await listScheduledHooks(db)).map((h) => [scheduleIdFor(h), h]));
  const existing = new Set<string>();
  for await (const summary of client.schedule.list()) {
    if (summary.scheduleId.startsWith(PREFIX)) existing.add(summary.scheduleId);
  }
  const changed = { created: 0, updated: 0, deleted: 0 };
  for (const id of existing) {
    const hook = wanted.get(id);
    if (!hook) {
      await client.schedule.getHandle(id).delete().catch((err: unknown) => {
        if (!(err instanceof ScheduleNotFoundError)) throw err;
      });
      changed.deleted++;
      continue;
    }
    const description = await client.schedule.getHandle(id).describe();
    const made = (description.action as { args?: HookFireInput[] }).args?.[0];
    const wantedArgs = (scheduleOptions(config, hook).action.args as HookFireInput[])[0];
    if (
      JSON.stringify([made?.schedule, made?.policy]) !== JSON.stringify([wantedArgs.schedule, wantedArgs.policy]) ||
      description.action.taskQueue !== config.temporalTaskQueue ||
      description.state.paused !== hook.policy.paused
    ) {
      await applyHookSchedule(client, config, hook);
      changed.updated++;
    }
  }
  for (const [id, hook] of wanted) {
    if (existing.has(id)) continue;
    await applyHookSchedule(client, config, hook);
    changed.created++;
  }
  return changed;
}
