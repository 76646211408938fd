import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { ScheduleNotFoundError } from '@temporalio/client';
import { createActivities } from '../../src/activities/index.js';
import { scheduleIdFor } from '../../src/hooks/schedules.js';
import { fireIdKey, scheduledTaskId } from '../../src/hooks/fireTaskId.js';
import { hookScheduleSweep } from '../../src/hooks/reconcileSweep.js';
import { LazyTemporalClient } from '../../src/temporal/connection.js';
import { eventually, type Stack } from '../../support/stack.js';
import { lastFires, ok, stackWithHookRole } from './hookStack.js';
import { fastTask } from '../../support/graphs.js';

/*
 * A scheduled hook on the real stack: its Temporal Schedule starts `hookFire` every 2 s, each fire creates one task
 * named by its schedule time and records it; a scheduler worker stopped for a while loses no fire (the server starts
 * the fires, they wait for a worker) and doubles none (the taskId and the fire are keyed by the schedule time).
 */

let stack: Stack;
const hook = { hookGroupId: 'sched', hookId: 'every-2s' };
const base = `/api/hooks/v1/hooks/${hook.hookGroupId}/${hook.hookId}`;
const STEP_MS = 2000;

before(async () => {
  // every 2 s: below the 60 s a deployment allows by default (TGS_HOOK_MIN_INTERVAL_S), to see many fires quickly
  stack = await stackWithHookRole('sched', 'scheduled hooks', { configOverrides: { hookMinIntervalS: 1 } });
});
after(async () => {
  await stack?.stop();
});


const fires = () => lastFires(stack, base);

test('a hook every 2 s fires at each schedule time, through a scheduler-worker restart, once each', async () => {
  ok(await stack.api.request('PUT', base, {
    metadata: { name: 'every 2 s', description: 'scheduled', owner: 'hooks@example.com' },
    schedule: ['*/2 * * * * *'],
    task: { ...fastTask('scheduled'), created: '${now}', deadline: { $fromNow: '1 hour' }, payload: { firedBy: '${firedBy}', at: '${now}' } },
  }));
  const handle = stack.client.schedule.getHandle(scheduleIdFor(hook));
  await eventually(async () => (await fires()).length >= 2, 'two scheduled fires');

  // the worker away for a while: the schedule keeps taking actions, their workflows wait for a worker
  await stack.stopWorker();
  const takenBefore = (await handle.describe()).info.numActionsTaken;
  await eventually(async () => (await handle.describe()).info.numActionsTaken >= takenBefore + 2, 'two actions taken while no worker runs', 15_000);
  await stack.startWorker();
  await eventually(async () => (await fires()).length >= takenBefore + 3, 'the fires of the restart recorded');
  ok(await stack.api.request('POST', `${base}/pause`));
  const description = await handle.describe();
  const taken = description.info.numActionsTaken;
  assert.equal(description.info.numActionsSkippedOverlap, 0, 'no schedule time skipped');
  const recorded = await eventually(async () => {
    const all = await fires();
    return all.length >= taken ? all : undefined;
  }, `a fire for each of the ${taken} actions`);

  // one fire per action, at consecutive schedule times 2 s apart, each a created task named by its time
  assert.equal(recorded.length, taken, 'as many fires as actions: none lost, none doubled');
  const times = recorded.map((f) => Date.parse(f.taskCreateTime)).sort((a, b) => a - b);
  for (let i = 1; i < times.length; i++) assert.equal(times[i] - times[i - 1], STEP_MS, `fire ${i} follows the one before by one step`);
  assert.equal(times[0] % STEP_MS, 0, 'on the schedule\'s even seconds');
  for (const fire of recorded) {
    assert.equal(fire.firedBy, 'schedule');
    assert.equal(fire.result, 'success', JSON.stringify(fire));
    assert.equal(fire.taskId, scheduledTaskId(await fireIdKey(stack.api.db.pool), hook.hookGroupId, hook.hookId, new Date(fire.taskCreateTime)));
    const task = ok(await stack.api.request('GET', `/api/queue/v1/task/${fire.taskId}`));
    assert.equal(task.created, fire.taskCreateTime, 'the template\'s `now` is the schedule time');
    assert.deepEqual(task.payload, { firedBy: 'schedule', at: fire.taskCreateTime });
  }
  // Temporal's own record of the latest actions names the same times
  for (const action of description.info.recentActions) {
    assert.ok(recorded.some((f) => f.taskCreateTime === action.scheduledAt.toISOString()), `the action at ${action.scheduledAt.toISOString()} fired`);
  }

  // the activity of each of those fires run again, as a retry after a worker died would: nothing new
  const activities = createActivities({ config: stack.config, pool: stack.api.db.pool });
  for (const fire of recorded) {
    const again = await activities.fireScheduledHook({ ...hook, scheduledAt: fire.taskCreateTime });
    assert.deepEqual(again, { result: 'created', taskId: fire.taskId });
  }
  assert.equal((await fires()).length, taken);
  const { rows } = await stack.api.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM tasks WHERE task_id = ANY($1)', [recorded.map((f) => f.taskId)]);
  assert.equal(rows[0].n, taken);
});

test('reconciliation recreates a hook\'s lost schedule and deletes one whose hook is gone; removeHook deletes its schedule', async () => {
  const other = { hookGroupId: 'sched', hookId: 'daily' };
  ok(await stack.api.request('PUT', `/api/hooks/v1/hooks/sched/daily`, {
    metadata: { name: 'daily', description: 'scheduled', owner: 'hooks@example.com' },
    schedule: ['0 3 * * *'],
    task: fastTask('daily'),
  }));
  await stack.client.schedule.getHandle(scheduleIdFor(other)).delete();
  const leftover = scheduleIdFor({ hookGroupId: 'gone', hookId: 'hook' });
  await stack.client.schedule.create({
    scheduleId: leftover,
    spec: { cronExpressions: ['0 3 * * *'] },
    action: { type: 'startWorkflow', workflowType: 'hookFire', taskQueue: stack.config.temporalTaskQueue, args: [{ hookGroupId: 'gone', hookId: 'hook', schedule: ['0 3 * * *'] }] },
  });
  // the list the reconciliation reads is Temporal's visibility store, which follows writes within a moment
  await eventually(async () => {
    const ids: string[] = [];
    for await (const s of stack.client.schedule.list()) ids.push(s.scheduleId);
    return ids.includes(leftover) && !ids.includes(scheduleIdFor(other));
  }, 'Temporal lists the schedules as they are now');

  const temporal = new LazyTemporalClient(stack.config);
  const lines: string[] = [];
  try {
    await hookScheduleSweep(stack.api.db.pool, stack.config, temporal, (line) => lines.push(line))();
  } finally {
    await temporal.close();
  }
  assert.match(lines.join('\n'), /1 created, 0 updated, 1 deleted/);
  const recreated = await stack.client.schedule.getHandle(scheduleIdFor(other)).describe();
  assert.equal(recreated.info.nextActionTimes[0].toISOString().slice(11), '03:00:00.000Z');
  await assert.rejects(stack.client.schedule.getHandle(leftover).describe(), ScheduleNotFoundError);

  ok(await stack.api.request('DELETE', '/api/hooks/v1/hooks/sched/daily'));
  await assert.rejects(stack.client.schedule.getHandle(scheduleIdFor(other)).describe(), ScheduleNotFoundError);
});
