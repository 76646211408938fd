import type { Endpoint } from '../../api/endpoint.js';
import { healthEndpoints } from '../../api/health.js';
import { pingEndpoint } from '../../api/ping.js';
import { createHook, getHookStatus, hook, listHookGroups, listHooks, removeHook, updateHook } from './hooks.js';
import { listLastFires } from './lastFires.js';
import { backfillHook, hookSchedule, pauseHook, setHookSchedulePolicy, unpauseHook } from './schedule.js';
import { getTriggerToken, resetTriggerToken, triggerHook, triggerHookWithToken } from './triggers.js';

/** Taskcluster's Hooks service (`/api/hooks/v1`): task templates fired on a schedule, by a call, or with a token. */
export const hooksEndpoints: Endpoint[] = [
  pingEndpoint('hooks'),
  ...healthEndpoints('hooks'),
  listHookGroups,
  listHooks,
  hook,
  getHookStatus,
  createHook,
  updateHook,
  removeHook,
  triggerHook,
  getTriggerToken,
  resetTriggerToken,
  triggerHookWithToken,
  listLastFires,
  // tgs's extensions (docs/formats.md § Hooks)
  hookSchedule,
  setHookSchedulePolicy,
  pauseHook,
  unpauseHook,
  backfillHook,
];
