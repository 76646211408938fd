import assert from 'node:assert/strict';
import slugid from 'slugid';
import type { TestApi } from '../../support/api.js';

/** Creates a task of provisionerId tgs-test for `workerType` (a deadline an hour out) and answers its taskId. */
export async function createTestTask(t: TestApi, workerType: string, payload: unknown, extra: Record<string, unknown> = {}): Promise<string> {
  const taskId = slugid.nice();
  const now = Date.now();
  const res = await t.request('PUT', `/api/queue/v1/task/${taskId}`, {
    provisionerId: 'tgs-test',
    workerType,
    created: new Date(now).toISOString(),
    deadline: new Date(now + 3600_000).toISOString(),
    payload,
    metadata: { name: `test ${workerType}`, description: `a task for ${workerType}`, owner: 'tests@example.com', source: 'https://example.com/tgs' },
    ...extra,
  });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return taskId;
}
