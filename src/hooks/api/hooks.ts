import { isDeepStrictEqual } from 'node:util';
import slugid from 'slugid';
import { declare } from '../../api/endpoint.js';
import { notifyAfterCommit, withTransaction } from '../../db/pool.js';
import { TgsError } from '../../errors.js';
import { checkSchedulePatterns, deleteHookSchedule, scheduleIdFor } from '../schedules.js';
import { checkBindings } from '../bindings.js';
import { checkScheduleInterval } from '../scheduleInterval.js';
import { HOOK_BINDINGS_CHANNEL } from '../listenerBindings.js';
import { checkTemplateBounds } from '../render.js';
import { sealToken } from '../tokenCipher.js';
import { checkTriggerSchema } from '../triggerSchema.js';
import { lockForHookWrite } from '../scheduleLock.js';
import { definitionOf, deleteHook, getHook, insertHook, listHookGroups as listGroups, listHooks as listGroupHooks, listLastFires, updateHookDefinition, type HookDefinition } from '../store.js';
import { DEFAULT_POLICY, noSuchHook, temporal, writeHook } from './writeHook.js';
import { createHookRequest, hookDefinition, hookStatus, listHookGroupsResponse, listHooksResponse } from './schemas.js';

type HookRequest = Omit<HookDefinition, 'hookGroupId' | 'hookId' | 'bindings'> & { hookGroupId?: string; hookId?: string; bindings?: HookDefinition['bindings'] };

/** The definition a create or update request asks for, checked before anything is written. */
function requestedDefinition(config: { exchangePrefix: string; hookMinIntervalS: number }, params: Record<string, string>, body: HookRequest, bindings: HookDefinition['bindings']): HookDefinition {
  if (body.hookGroupId !== undefined && body.hookGroupId !== params.hookGroupId) throw new TgsError('InputError', 'Hook Group Ids do not match: the body\'s hookGroupId must be the URL\'s (or left out)');
  if (body.hookId !== undefined && body.hookId !== params.hookId) throw new TgsError('InputError', 'Hook Ids do not match: the body\'s hookId must be the URL\'s (or left out)');
  checkTriggerSchema(body.triggerSchema);
  checkSchedulePatterns(body.schedule);
  checkScheduleInterval(body.schedule, config.hookMinIntervalS);
  checkBindings(config.exchangePrefix, body.bindings ?? bindings);
  return {
    hookGroupId: params.hookGroupId,
    hookId: params.hookId,
    metadata: body.metadata,
    task: body.task,
    bindings: body.bindings ?? bindings,
    schedule: body.schedule,
    triggerSchema: body.triggerSchema,
  };
}

export const listHookGroups = declare({
  service: 'hooks',
  name: 'listHookGroups',
  title: 'List hook groups',
  description: 'Every hook group with at least one hook.',
  method: 'get',
  route: '/hooks',
  scopes: 'hooks:list-hooks:',
  output: listHookGroupsResponse,
  async handler({ deps }) {
    return { groups: await listGroups(deps.pool) };
  },
});

export const listHooks = declare({
  service: 'hooks',
  name: 'listHooks',
  title: 'List hooks in a given group',
  description: 'The definitions of every hook in a group, in hookId order; 404 for a group without hooks.',
  method: 'get',
  route: '/hooks/<hookGroupId>',
  scopes: 'hooks:list-hooks:<hookGroupId>',
  output: listHooksResponse,
  async handler({ params, deps }) {
    const hooks = await listGroupHooks(deps.pool, params.hookGroupId);
    if (hooks.length === 0) throw new TgsError('ResourceNotFound', `No such group: ${params.hookGroupId} has no hooks`);
    return { hooks: hooks.map(definitionOf) };
  },
});

export const hook = declare({
  service: 'hooks',
  name: 'hook',
  title: 'Get hook definition',
  description: 'The hook\'s definition.',
  method: 'get',
  route: '/hooks/<hookGroupId>/<hookId>',
  scopes: 'hooks:get:<hookGroupId>:<hookId>',
  output: hookDefinition,
  async handler({ params, deps }) {
    const found = await getHook(deps.pool, params.hookGroupId, params.hookId);
    if (!found) throw noSuchHook(params);
    return definitionOf(found);
  },
});

export const getHookStatus = declare({
  service: 'hooks',
  name: 'getHookStatus',
  title: 'Get hook status',
  description:
    'The hook\'s last fire (`no-fire` before the first) and, for a scheduled hook, the next time its Temporal ' +
    'Schedule fires (left out while Temporal does not answer). Deprecated in Taskcluster in favour of listLastFires.',
  method: 'get',
  route: '/hooks/<hookGroupId>/<hookId>/status',
  scopes: 'hooks:status:<hookGroupId>/<hookId>',
  output: hookStatus,
  async handler({ params, deps }) {
    const found = await getHook(deps.pool, params.hookGroupId, params.hookId);
    if (!found) throw noSuchHook(params);
    const [latest] = await listLastFires(deps.pool, found.hookGroupId, found.hookId, { limit: 1 });
    const lastFire = !latest
      ? { result: 'no-fire' }
      : latest.result === 'success'
        ? { result: 'success', taskId: latest.taskId, time: latest.taskCreateTime.toISOString() }
        : { result: 'error', error: parsedError(latest.error), time: latest.taskCreateTime.toISOString() };
    let nextScheduledDate: string | undefined;
    if (found.schedule.length > 0) {
      try {
        const description = await (await deps.temporal.get()).schedule.getHandle(scheduleIdFor(found)).describe();
        nextScheduledDate = description.info.nextActionTimes[0]?.toISOString();
      } catch {
        // best effort: the status is a snapshot, and Temporal being away is not the caller's mistake
      }
    }
    return { lastFire, ...(nextScheduledDate ? { nextScheduledDate } : {}) };
  },
});

function parsedError(error: string): Record<string, unknown> {
  try {
    const parsed: unknown = JSON.parse(error);
    if (parsed && typeof parsed === 'object' && !Array.isArray(parsed)) return parsed as Record<string, unknown>;
  } catch {
    // a plain message
  }
  return { message: error };
}

export const createHook = declare<HookRequest>({
  service: 'hooks',
  name: 'createHook',
  title: 'Create a hook',
  description:
    'Create a hook. The caller needs `hooks:modify-hook:<hookGroupId>/<hookId>` and `assume:hook-id:<hookGroupId>/<hookId>`, ' +
    'the role whose scopes the hook\'s tasks are created with. A `schedule` (cron patterns, UTC; 6 fields have seconds ' +
    'first) becomes the hook\'s Temporal Schedule; a pattern Temporal cannot parse is a 400 and nothing is written. ' +
    'The same request again answers with the hook; a different definition for an existing hook is a 409.',
  method: 'put',
  route: '/hooks/<hookGroupId>/<hookId>',
  scopes: { AllOf: ['hooks:modify-hook:<hookGroupId>/<hookId>', 'assume:hook-id:<hookGroupId>/<hookId>'] },
  input: createHookRequest,
  output: hookDefinition,
  async handler({ params, body, deps }) {
    const definition = requestedDefinition(deps.config, params, body, []);
    await checkTemplateBounds(definition.task, `${definition.hookGroupId}/${definition.hookId}`);
    const created = await writeHook(
      deps,
      (client) => insertHook(client, { ...definition, triggerToken: sealToken(deps.config.hookTokenKey, definition, slugid.nice()) }),
      (inserted) => (inserted ? { ...definition, policy: DEFAULT_POLICY } : undefined),
    );
    if (!created) {
      const existing = await getHook(deps.pool, params.hookGroupId, params.hookId);
      if (!existing || !isDeepStrictEqual(definitionOf(existing), definition)) {
        throw new TgsError('RequestConflict', `hook \`${params.hookGroupId}/${params.hookId}\` already exists with a different definition: change it with updateHook`);
      }
    }
    return definition;
  },
});

export const updateHook = declare<HookRequest>({
  service: 'hooks',
  name: 'updateHook',
  title: 'Update a hook',
  description:
    'Replace a hook\'s definition (all but its ids; `bindings` left out keep theirs); its Temporal Schedule follows ' +
    '(created, changed, or deleted when the schedule becomes empty) in the same step. Same scopes as createHook.',
  method: 'post',
  route: '/hooks/<hookGroupId>/<hookId>',
  scopes: { AllOf: ['hooks:modify-hook:<hookGroupId>/<hookId>', 'assume:hook-id:<hookGroupId>/<hookId>'] },
  input: createHookRequest,
  output: hookDefinition,
  async handler({ params, body, deps }) {
    const existing = await getHook(deps.pool, params.hookGroupId, params.hookId);
    if (!existing) throw noSuchHook(params);
    const definition = requestedDefinition(deps.config, params, body, existing.bindings);
    await checkTemplateBounds(definition.task, `${definition.hookGroupId}/${definition.hookId}`);
    const updated = await writeHook(
      deps,
      (client) => updateHookDefinition(client, definition),
      (row) => row && { ...definition, policy: row.policy, previousSchedule: existing.schedule },
    );
    if (!updated) throw noSuchHook(params);
    return definitionOf(updated);
  },
});

export const removeHook = declare({
  service: 'hooks',
  name: 'removeHook',
  title: 'Delete a hook',
  description: 'Remove a hook, its last fires and its Temporal Schedule.',
  method: 'delete',
  route: '/hooks/<hookGroupId>/<hookId>',
  scopes: 'hooks:modify-hook:<hookGroupId>/<hookId>',
  async handler({ params, deps }) {
    await withTransaction(deps.pool, async (client) => {
      await lockForHookWrite(client);
      const existing = await getHook(client, params.hookGroupId, params.hookId);
      if (!existing || !(await deleteHook(client, params.hookGroupId, params.hookId))) throw noSuchHook(params);
      if (existing.bindings.length > 0) await notifyAfterCommit(client, HOOK_BINDINGS_CHANNEL, ['hook']);
      if (existing.schedule.length > 0) await deleteHookSchedule(await temporal(deps), existing);
    });
    return {};
  },
});
