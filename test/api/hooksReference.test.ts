import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
// The official client, unmodified, and the Hooks reference it ships: a client version with a new entry makes this fail.
import taskcluster from 'taskcluster-client';
import { NOT_SERVED } from '../../src/api/notServed.js';
import { ScheduleNotFoundError } from '@temporalio/client';
import { hooksEndpoints } from '../../src/hooks/api/index.js';
import { scheduleIdFor } from '../../src/hooks/schedules.js';
import type { DevServer } from '../../src/temporal/devServer.js';
import { startTestApi, type TestApi } from '../../support/api.js';
import { startTestTemporal } from '../../support/temporal.js';
import { assertReferenceServed, recording, referenceEntries, type Client } from '../helpers/taskclusterReference.js';

const reference = referenceEntries('Hooks');

let t: TestApi;
let temporal: DevServer;
before(async () => {
  temporal = await startTestTemporal();
  t = await startTestApi({ temporalAddress: temporal.address });
});
after(async () => {
  await t?.close();
  await temporal?.stop();
});

type ClientError = Error & { statusCode?: number; code?: string };

test('every entry of the Hooks reference is served with its route and method, or listed in NOT_SERVED', () => {
  assertReferenceServed('Hooks', hooksEndpoints);
});

test('every Hooks entry answers through the official client with Taskcluster\'s semantics', async () => {
  const exercised = new Set<string>();
  const record = (client: Client): Client => recording(client, exercised);
  const options = { rootUrl: t.rootUrl, retries: 0 };
  const hooks = record(new taskcluster.Hooks({ ...options, credentials: t.root }) as unknown as Client);
  const anonymousHooks = record(new taskcluster.Hooks(options) as unknown as Client);
  const queue = new taskcluster.Queue({ ...options, credentials: t.root }) as unknown as Client;
  const auth = new taskcluster.Auth({ ...options, credentials: t.root }) as unknown as Client;
  const refuses = async (call: Promise<unknown>, status: number, code: string) =>
    assert.rejects(call, (err: ClientError) => {
      assert.equal(err.statusCode, status, err.message);
      assert.equal(err.code, code);
      return true;
    });

  // --- service endpoints
  assert.equal((await hooks.ping()).alive, true);
  assert.deepEqual(await hooks.lbheartbeat(), {});
  assert.equal(typeof (await hooks.version()).version, 'string');
  assert.deepEqual(Object.keys(await hooks.heartbeat()).sort(), ['postgres', 'rabbitmq', 'temporal']);

  // --- a hook whose id holds a slash (sent as %2F), fired with the role's scopes
  const [group, id] = ['tgs-ref', 'nightly/build'];
  await auth.createRole(`hook-id:${group}/${id}`, { description: 'the hook\'s tasks', scopes: ['queue:create-task:lowest:tgs-ref/hooks', 'queue:scheduler-id:-'] });
  const definition = {
    metadata: { name: 'nightly', description: 'builds every night', owner: 'builds@example.com', emailOnError: false },
    schedule: ['0 0 0 * * *'],
    triggerSchema: { type: 'object', properties: { answer: { type: 'integer' }, taskId: { type: 'string' } }, additionalProperties: false },
    task: {
      provisionerId: 'tgs-ref',
      workerType: 'hooks',
      payload: { firedBy: '${firedBy}', answer: { $if: 'firedBy != "schedule"', then: { $eval: 'payload.answer' } } },
      metadata: { name: 'nightly ${firedBy}', description: 'from a hook', owner: 'builds@example.com', source: 'https://example.com/hooks' },
    },
  };
  const created = await hooks.createHook(group, id, definition);
  assert.deepEqual(created, { hookGroupId: group, hookId: id, bindings: [], ...definition });
  assert.deepEqual(await hooks.createHook(group, id, definition), created, 'the same create again answers with the hook');
  await refuses(hooks.createHook(group, id, { ...definition, schedule: [] }), 409, 'RequestConflict');
  await refuses(hooks.createHook(group, 'bad-cron', { ...definition, schedule: ['not a cron'] }), 400, 'InputError');
  await refuses(hooks.hook(group, 'bad-cron'), 404, 'ResourceNotFound');
  assert.deepEqual(await hooks.hook(group, id), created);
  assert.deepEqual(await hooks.listHookGroups(), { groups: [group] });
  assert.deepEqual(await hooks.listHooks(group), { hooks: [created] });
  await refuses(hooks.listHooks('no-such-group'), 404, 'ResourceNotFound');

  const status = await hooks.getHookStatus(group, id);
  assert.deepEqual(status.lastFire, { result: 'no-fire' });
  const next = new Date(status.nextScheduledDate);
  assert.equal(next.toISOString().slice(11), '00:00:00.000Z', 'the 6-field pattern has seconds first: midnight UTC');
  assert.ok(next.getTime() > Date.now() && next.getTime() <= Date.now() + 24 * 3600 * 1000);

  // --- triggers: the payload is the context's `payload`; a taskId in it names the task
  const fired = await hooks.triggerHook(group, id, { answer: 42 });
  assert.deepEqual(fired.status, { taskId: fired.taskId });
  const task = await queue.task(fired.taskId);
  assert.deepEqual(task.payload, { firedBy: 'triggerHook', answer: 42 });
  assert.equal(task.taskGroupId, fired.taskId, 'a template without taskGroupId starts its own group');
  await refuses(hooks.triggerHook(group, id, { answer: 'not a number' }), 400, 'InputError');
  await refuses(hooks.triggerHook(group, id, { taskId: 'not-a-slugid' }), 400, 'InputError');
  const named = taskcluster.slugid();
  assert.equal((await hooks.triggerHook(group, id, { answer: 1, taskId: named })).taskId, named);

  const { token } = await hooks.getTriggerToken(group, id);
  const byToken = await anonymousHooks.triggerHookWithToken(group, id, token, { answer: 7 });
  assert.deepEqual((await queue.task(byToken.taskId)).payload, { firedBy: 'triggerHookWithToken', answer: 7 });
  const { token: fresh } = await hooks.resetTriggerToken(group, id);
  assert.notEqual(fresh, token);
  await refuses(anonymousHooks.triggerHookWithToken(group, id, token, { answer: 7 }), 401, 'AuthenticationFailed');
  assert.ok((await anonymousHooks.triggerHookWithToken(group, id, fresh, { answer: 8 })).taskId);

  const { lastFires } = await hooks.listLastFires(group, id);
  assert.deepEqual(
    lastFires.map((f: { firedBy: string; result: string; taskState: string }) => [f.firedBy, f.result, f.taskState]),
    [['triggerHookWithToken', 'success', 'pending'], ['triggerHookWithToken', 'success', 'pending'], ['triggerHook', 'success', 'pending'], ['triggerHook', 'success', 'pending']],
  );
  const paged = await hooks.listLastFires(group, id, { limit: 3 });
  assert.equal(paged.lastFires.length, 3);
  const rest = await hooks.listLastFires(group, id, { limit: 3, continuationToken: paged.continuationToken });
  assert.deepEqual(rest.lastFires.map((f: { taskId: string }) => f.taskId), [lastFires[3].taskId]);
  assert.equal(rest.continuationToken, undefined);
  assert.equal((await hooks.getHookStatus(group, id)).lastFire.taskId, lastFires[0].taskId);

  // --- update (bindings left out keep theirs), then remove
  const updated = await hooks.updateHook(group, id, { ...definition, schedule: ['*/5 * * * *'] });
  assert.deepEqual(updated.schedule, ['*/5 * * * *']);
  assert.equal(new Date((await hooks.getHookStatus(group, id)).nextScheduledDate).getUTCMinutes() % 5, 0);
  await refuses(hooks.updateHook(group, 'missing', definition), 404, 'ResourceNotFound');
  const client = await t.api.deps.temporal.get();
  const unscheduled = await hooks.updateHook(group, id, { ...definition, schedule: [] });
  assert.deepEqual(unscheduled.schedule, []);
  assert.equal((await hooks.getHookStatus(group, id)).nextScheduledDate, undefined);
  await assert.rejects(client.schedule.getHandle(scheduleIdFor({ hookGroupId: group, hookId: id })).describe(), ScheduleNotFoundError, 'an empty schedule deletes the Temporal Schedule');
  await hooks.updateHook(group, id, definition);
  assert.deepEqual(await hooks.removeHook(group, id), {});
  await refuses(hooks.hook(group, id), 404, 'ResourceNotFound');
  await refuses(hooks.listLastFires(group, id), 404, 'ResourceNotFound');
  await refuses(hooks.removeHook(group, id), 404, 'ResourceNotFound');

  for (const scheduleId of [scheduleIdFor({ hookGroupId: group, hookId: id }), scheduleIdFor({ hookGroupId: group, hookId: 'bad-cron' })]) {
    await assert.rejects(client.schedule.getHandle(scheduleId).describe(), ScheduleNotFoundError, `${scheduleId}: the removed hook's schedule is gone, the refused one never made`);
  }

  const missed = reference.filter((e) => !(e.name in NOT_SERVED.Hooks) && !exercised.has(e.name)).map((e) => e.name);
  assert.deepEqual(missed, [], 'every served Hooks entry is called above');
});
