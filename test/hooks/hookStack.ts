import assert from 'node:assert/strict';
import { startStack, type Stack } from '../../support/stack.js';

/** A response's body, failing the test on a 4xx or 5xx with what was answered. */
export function ok(res: { status: number; body: any }) {
  assert.ok(res.status < 400, `${res.status} ${JSON.stringify(res.body)}`);
  return res.body;
}

/**
 * The stack the scheduled-hook tests run on, with the role `hook-id:<hookGroupId>/*` granting what their hooks' tasks
 * need (lowest-priority tasks of tgs-test/fast, no scheduler).
 */
export async function stackWithHookRole(hookGroupId: string, description: string, options: Parameters<typeof startStack>[0] = {}): Promise<Stack> {
  const stack = await startStack(options);
  ok(await stack.api.request('PUT', `/api/auth/v1/roles/${encodeURIComponent(`hook-id:${hookGroupId}/*`)}`, {
    description,
    scopes: ['queue:create-task:lowest:tgs-test/fast', 'queue:scheduler-id:-'],
  }));
  return stack;
}

/** One of a hook's recorded fires, as listLastFires answers it. */
export interface HookFire {
  taskId: string;
  firedBy: string;
  taskCreateTime: string;
  result: string;
}

/** The fires recorded for the hook at `base` (its API path); none while the hook does not exist. */
export async function lastFires(stack: Stack, base: string): Promise<HookFire[]> {
  const res = await stack.api.request('GET', `${base}/last-fires?limit=1000`);
  if (res.status === 404) return [];
  return ok(res).lastFires;
}
