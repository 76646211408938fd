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
export async function stackWithHookRole(hookGroupId: string, description: string): Promise<Stack> {
  const stack = await startStack();
  ok(await stack.api.request('PUT', `/api/auth/v1/roles/${encodeURIComponent(`hook-id:${hookGroupId}/*`)}`, {
    description,
    scopes: ['queue:create-task:lowest:tgs-test/fast', 'queue:scheduler-id:-'],
  }));
  return stack;
}
