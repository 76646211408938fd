import type { ApiDeps } from '../../api/deps.js';
import { declare, type JsonSchema } from '../../api/endpoint.js';
import { msToTs } from '@temporalio/common/lib/time.js';
import { TgsError } from '../../errors.js';
import { scheduleIdFor } from '../schedules.js';
import { getHook, OVERLAPS, setSchedulePolicy, type HookRow, type SchedulePolicy } from '../store.js';
import { noSuchHook, temporal, writeHook } from './writeHook.js';

/**
 * tgs's extensions of the Hooks service (docs/formats.md § Hooks): a hook's Temporal Schedule read, paused and
 * resumed, its overlap policy and catch-up window set, and a time range backfilled. Not in Taskcluster's reference.
 */

/**
 * A backfill fires fewer schedule times than this (a pattern may fire every second): Temporal lists the range's
 * times first, and answers at most 1000, so 1000 means "that many or more".
 */
const MAX_BACKFILL_FIRES = 1000;

const policyShape: JsonSchema = {
  paused: { type: 'boolean' },
  overlap: { enum: [...OVERLAPS] },
  catchupWindowSeconds: { type: 'integer', minimum: 10, maximum: 366 * 86400 },
};

const hookScheduleResponse: JsonSchema = {
  type: 'object',
  additionalProperties: false,
  required: ['schedule', 'paused', 'overlap', 'catchupWindowSeconds'],
  properties: {
    schedule: { type: 'array', items: { type: 'string' } },
    ...policyShape,
    scheduleId: { type: 'string' },
    nextScheduledDates: { type: 'array', items: { type: 'string', format: 'date-time' } },
    recentActions: {
      type: 'array',
      items: {
        type: 'object',
        additionalProperties: false,
        required: ['scheduledAt', 'takenAt'],
        properties: { scheduledAt: { type: 'string', format: 'date-time' }, takenAt: { type: 'string', format: 'date-time' } },
      },
    },
  },
};

async function mustGet(deps: ApiDeps, params: Record<string, string>): Promise<HookRow> {
  const found = await getHook(deps.pool, params.hookGroupId, params.hookId);
  if (!found) throw noSuchHook(params);
  return found;
}

/** The hook's policy and, when it has a schedule, what its Temporal Schedule says (left out while Temporal is away). */
async function scheduleView(deps: ApiDeps, hook: HookRow) {
  const view = { schedule: hook.schedule, ...hook.policy };
  if (hook.schedule.length === 0) return view;
  const scheduleId = scheduleIdFor(hook);
  try {
    const { info } = await (await deps.temporal.get()).schedule.getHandle(scheduleId).describe();
    return {
      ...view,
      scheduleId,
      nextScheduledDates: info.nextActionTimes.map((d) => d.toISOString()),
      recentActions: info.recentActions.map((a) => ({ scheduledAt: a.scheduledAt.toISOString(), takenAt: a.takenAt.toISOString() })),
    };
  } catch {
    return { ...view, scheduleId };
  }
}

/** Sets the hook's policy and its schedule with it, in one step (src/hooks/api/writeHook.ts). */
async function changePolicy(deps: ApiDeps, params: Record<string, string>, change: (policy: SchedulePolicy) => SchedulePolicy) {
  const existing = await mustGet(deps, params);
  const updated = await writeHook(
    deps,
    (client) => setSchedulePolicy(client, params.hookGroupId, params.hookId, change(existing.policy)),
    (row) => row,
  );
  if (!updated) throw noSuchHook(params);
  return scheduleView(deps, updated);
}

export const hookSchedule = declare({
  service: 'hooks',
  name: 'hookSchedule',
  title: 'Get a hook\'s schedule (tgs)',
  description:
    'The hook\'s schedule, whether it is paused, its overlap policy and catch-up window, and from its Temporal ' +
    'Schedule the next schedule times and the recent actions (each `scheduledAt` is a fire\'s `now`).',
  method: 'get',
  route: '/hooks/<hookGroupId>/<hookId>/schedule',
  scopes: 'hooks:status:<hookGroupId>/<hookId>',
  output: hookScheduleResponse,
  async handler({ params, deps }) {
    return scheduleView(deps, await mustGet(deps, params));
  },
});

export const setHookSchedulePolicy = declare<{ overlap?: SchedulePolicy['overlap']; catchupWindowSeconds?: number }>({
  service: 'hooks',
  name: 'setHookSchedulePolicy',
  title: 'Set a hook\'s overlap policy and catch-up window (tgs)',
  description:
    'How the hook\'s schedule treats a fire that comes while the one before still runs (`overlap`, Temporal\'s ' +
    'policies; default `ALLOW_ALL`: every schedule time fires) and how old a missed schedule time may be and still ' +
    'fire after an outage (`catchupWindowSeconds`, at least 10; default a day). Fields left out keep their value.',
  method: 'put',
  route: '/hooks/<hookGroupId>/<hookId>/schedule-policy',
  scopes: 'hooks:modify-hook:<hookGroupId>/<hookId>',
  input: { type: 'object', additionalProperties: false, properties: { overlap: policyShape.overlap, catchupWindowSeconds: policyShape.catchupWindowSeconds } },
  output: hookScheduleResponse,
  async handler({ params, body, deps }) {
    return changePolicy(deps, params, (policy) => ({ ...policy, ...body }));
  },
});

export const pauseHook = declare({
  service: 'hooks',
  name: 'pauseHook',
  title: 'Pause a hook\'s schedule (tgs)',
  description: 'Stops the hook\'s scheduled fires until unpauseHook (triggers still fire). Schedule times while paused do not fire later.',
  method: 'post',
  route: '/hooks/<hookGroupId>/<hookId>/pause',
  scopes: 'hooks:modify-hook:<hookGroupId>/<hookId>',
  output: hookScheduleResponse,
  async handler({ params, deps }) {
    return changePolicy(deps, params, (policy) => ({ ...policy, paused: true }));
  },
});

export const unpauseHook = declare({
  service: 'hooks',
  name: 'unpauseHook',
  title: 'Resume a hook\'s schedule (tgs)',
  description: 'Resumes the hook\'s scheduled fires from the next schedule time; backfillHook fires the ones missed.',
  method: 'post',
  route: '/hooks/<hookGroupId>/<hookId>/unpause',
  scopes: 'hooks:modify-hook:<hookGroupId>/<hookId>',
  output: hookScheduleResponse,
  async handler({ params, deps }) {
    return changePolicy(deps, params, (policy) => ({ ...policy, paused: false }));
  },
});

export const backfillHook = declare<{ start: string; end: string }>({
  service: 'hooks',
  name: 'backfillHook',
  title: 'Backfill a hook\'s schedule over a past time range (tgs)',
  description:
    `Fires the hook once for every schedule time in [start, end) (in the past; fewer than ${MAX_BACKFILL_FIRES} times), ` +
    'each with `now` set to that schedule time, through its Temporal Schedule; a paused schedule backfills too. The ' +
    'task\'s default `created` and `deadline` count from when it is fired (the queue takes a task created within 15 ' +
    'minutes of the present only), so a template meant for backfills should not set `created` from `now`. ' +
    'A schedule time that already fired creates nothing new (its taskId is derived from the time). Answers at once; ' +
    'the fires follow within seconds (listLastFires).',
  method: 'post',
  route: '/hooks/<hookGroupId>/<hookId>/backfill',
  scopes: { AllOf: ['hooks:modify-hook:<hookGroupId>/<hookId>', 'hooks:trigger-hook:<hookGroupId>/<hookId>'] },
  input: {
    type: 'object',
    additionalProperties: false,
    required: ['start', 'end'],
    properties: { start: { type: 'string', format: 'date-time' }, end: { type: 'string', format: 'date-time' } },
  },
  output: hookScheduleResponse,
  async handler({ params, body, deps }) {
    const [start, end] = [new Date(body.start), new Date(body.end)];
    if (!(start < end)) throw new TgsError('InputError', 'start must be before end');
    if (end.getTime() > Date.now()) throw new TgsError('InputError', 'end must not be in the future: the schedule fires those times itself');
    const hook = await mustGet(deps, params);
    if (hook.schedule.length === 0) throw new TgsError('InputError', `hook ${hook.hookGroupId}/${hook.hookId} has no schedule to backfill: give it one with updateHook, or use triggerHook`);
    const client = await temporal(deps);
    try {
      const { startTime } = (await client.workflowService.listScheduleMatchingTimes({
        namespace: deps.config.temporalNamespace,
        scheduleId: scheduleIdFor(hook),
        startTime: msToTs(start.getTime()),
        endTime: msToTs(end.getTime()),
      })) as { startTime?: unknown[] | null };
      const count = startTime?.length ?? 0;
      if (count >= MAX_BACKFILL_FIRES) {
        throw new TgsError('InputError', `the range holds ${MAX_BACKFILL_FIRES} schedule times or more; a backfill fires fewer: split the range`);
      }
      await client.schedule.getHandle(scheduleIdFor(hook)).backfill({ start, end, overlap: 'ALLOW_ALL' });
    } catch (err) {
      if (err instanceof TgsError) throw err;
      throw new TgsError('ServiceUnavailable', `Temporal did not take the backfill (${(err as Error).message}); nothing was fired, try again`);
    }
    return scheduleView(deps, hook);
  },
});
