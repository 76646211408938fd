import slugid from 'slugid';
import type { ApiDeps } from '../../api/deps.js';
import { declare } from '../../api/endpoint.js';
import { SLUGID } from '../../api/patterns.js';
import { sameSecret } from '../../auth/authenticate.js';
import { TgsError } from '../../errors.js';
import { fireHook } from '../fire.js';
import type { FireContext } from '../render.js';
import { openToken, sealToken } from '../tokenCipher.js';
import { checkTriggerPayload } from '../triggerSchema.js';
import { getHook, setTriggerToken, type FiredBy, type HookRow } from '../store.js';
import { noSuchHook } from './writeHook.js';
import { triggerHookRequest, triggerHookResponse, triggerTokenResponse } from './schemas.js';

/**
 * triggerHook and triggerHookWithToken: the payload checked against the hook's triggerSchema, then the hook fired
 * (src/hooks/fire.ts) with `{firedBy, payload}` (and the caller's `clientId`). A refusal is recorded in the hook's
 * last fires and answered as Taskcluster does: 403 naming the hook's role when it lacks createTask's scopes, 400
 * `While calling createTask: …` or `While firing hook: …` otherwise.
 */
async function trigger(deps: ApiDeps, hook: HookRow, payload: Record<string, unknown>, firedBy: FiredBy, clientId?: string) {
  checkTriggerPayload(hook.triggerSchema, payload);
  if (payload.taskId !== undefined && (typeof payload.taskId !== 'string' || !SLUGID.test(payload.taskId))) {
    throw new TgsError('InputError', `Invalid taskId format: ${JSON.stringify(payload.taskId)} (a slugid, or leave it out)`);
  }
  const context: FireContext & { firedBy: FiredBy } = { firedBy, payload, ...(clientId !== undefined ? { clientId } : {}) };
  const taskId = (payload.taskId as string | undefined) ?? slugid.nice();
  const outcome = await fireHook(deps, hook, context, { taskId, now: new Date() });
  switch (outcome.result) {
    case 'created':
      return { taskId, status: { taskId } };
    case 'declined':
      return {};
    case 'refused':
      throw outcome.error;
    case 'no-hook':
      throw noSuchHook(hook);
  }
}

async function mustGet(deps: ApiDeps, params: Record<string, string>): Promise<HookRow> {
  const found = await getHook(deps.pool, params.hookGroupId, params.hookId);
  if (!found) throw noSuchHook(params);
  return found;
}

export const triggerHook = declare<Record<string, unknown>>({
  service: 'hooks',
  name: 'triggerHook',
  title: 'Trigger a hook',
  description:
    'Create the hook\'s task now: the body (matching the hook\'s triggerSchema) is the JSON-e context\'s `payload`; a ' +
    '`taskId` in it names the task. The task is created with the scopes of the role `hook-id:<hookGroupId>/<hookId>`, ' +
    'not the caller\'s. Answers `{taskId}`, or `{}` when the template renders no task.',
  method: 'post',
  route: '/hooks/<hookGroupId>/<hookId>/trigger',
  scopes: 'hooks:trigger-hook:<hookGroupId>/<hookId>',
  input: triggerHookRequest,
  output: triggerHookResponse,
  async handler({ params, body, deps, auth }) {
    return trigger(deps, await mustGet(deps, params), body, 'triggerHook', auth.clientId);
  },
});

export const triggerHookWithToken = declare<Record<string, unknown>>({
  service: 'hooks',
  name: 'triggerHookWithToken',
  title: 'Trigger a hook with a token',
  description:
    'As triggerHook, for callers without credentials (webhooks): the URL carries the hook\'s trigger token ' +
    '(getTriggerToken); a wrong or reset token is a 401.',
  method: 'post',
  route: '/hooks/<hookGroupId>/<hookId>/trigger/<token>',
  input: triggerHookRequest,
  output: triggerHookResponse,
  async handler({ params, body, deps }) {
    const found = await mustGet(deps, params);
    if (!sameSecret(params.token, openToken(deps.config.hookTokenKey, found, found.triggerToken))) {
      throw new TgsError('AuthenticationFailed', 'invalid hook token: get the current one with getTriggerToken (resetTriggerToken replaces it)');
    }
    return trigger(deps, found, body, 'triggerHookWithToken');
  },
});

export const getTriggerToken = declare({
  service: 'hooks',
  name: 'getTriggerToken',
  title: 'Get a trigger token',
  description: 'The secret token for triggerHookWithToken; resetTriggerToken replaces it.',
  method: 'get',
  route: '/hooks/<hookGroupId>/<hookId>/token',
  scopes: 'hooks:get-trigger-token:<hookGroupId>/<hookId>',
  output: triggerTokenResponse,
  async handler({ params, deps }) {
    const found = await mustGet(deps, params);
    return { token: openToken(deps.config.hookTokenKey, found, found.triggerToken) };
  },
});

export const resetTriggerToken = declare({
  service: 'hooks',
  name: 'resetTriggerToken',
  title: 'Reset a trigger token',
  description: 'Replace the hook\'s trigger token with a new one: the old one stops working at once.',
  method: 'post',
  route: '/hooks/<hookGroupId>/<hookId>/token',
  scopes: 'hooks:reset-trigger-token:<hookGroupId>/<hookId>',
  output: triggerTokenResponse,
  async handler({ params, deps }) {
    const token = slugid.nice();
    const stored = sealToken(deps.config.hookTokenKey, { hookGroupId: params.hookGroupId, hookId: params.hookId }, token);
    if (!(await setTriggerToken(deps.pool, params.hookGroupId, params.hookId, stored))) throw noSuchHook(params);
    return { token };
  },
});
