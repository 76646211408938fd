import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { DurableTemporal } from '../../bench/chaos/temporal.js';
import { scheduleIdFor } from '../../src/hooks/schedules.js';
import { fireIdKey, scheduledTaskId } from '../../src/hooks/fireTaskId.js';
import { eventually, type Stack } from '../../support/stack.js';
import { lastFires, ok, stackWithHookRole } from '../hooks/hookStack.js';
import { fastTask } from '../../support/graphs.js';

/*
 * A hook every 2 s through a SIGKILL and restart of the Temporal server (its sqlite file kept, as a production
 * server's database is): the schedule's times missed while the server was down are taken when it is back (within the
 * catch-up window), each fires once, and the times the server was up fired on time. Checked against what the schedule
 * itself recorded (numActionsTaken, recentActions). Its own Temporal server, killed: a serial test.
 */

const STEP_MS = 2000;
const hook = { hookGroupId: 'restart', hookId: 'every-2s' };
const base = `/api/hooks/v1/hooks/${hook.hookGroupId}/${hook.hookId}`;
let dir: string;
let temporal: DurableTemporal;
let stack: Stack;

before(async () => {
  dir = mkdtempSync(path.join(tmpdir(), 'tgs-hook-restart-'));
  temporal = await DurableTemporal.start(dir);
  stack = await stackWithHookRole(hook.hookGroupId, 'scheduled hooks through a Temporal restart', { temporalAddress: temporal.address, configOverrides: { hookMinIntervalS: 1 } });
});
after(async () => {
  await stack?.stop();
  await temporal?.stop();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const fires = () => lastFires(stack, base);

test('a hook every 2 s loses and doubles no fire through a Temporal server kill and restart', { timeout: 240_000 }, async () => {
  ok(await stack.api.request('PUT', base, {
    metadata: { name: 'every 2 s', description: 'scheduled through a restart', owner: 'hooks@example.com' },
    schedule: ['*/2 * * * * *'],
    task: { ...fastTask('scheduled'), created: '${now}', deadline: { $fromNow: '1 hour' } },
  }));
  await eventually(async () => (await fires()).length >= 2, 'two scheduled fires', 30_000);

  const killedAt = Date.now();
  await temporal.kill();
  // down for three schedule times or more
  await new Promise((resolve) => setTimeout(resolve, 3 * STEP_MS + 500));
  await temporal.up();
  const upAt = Date.now();
  // two fires scheduled after the server came back: it runs the schedule again
  await eventually(async () => (await fires()).some((f) => Date.parse(f.taskCreateTime) > upAt + STEP_MS), 'a fire scheduled after the restart', 90_000);

  ok(await stack.api.request('POST', `${base}/pause`));
  const handle = stack.client.schedule.getHandle(scheduleIdFor(hook));
  const description = await handle.describe();
  const taken = description.info.numActionsTaken;
  const recorded = await eventually(async () => {
    const all = await fires();
    return all.length >= taken ? all : undefined;
  }, `a fire for each of the ${taken} actions`, 60_000);

  // one fire per action the schedule took, none doubled, each a created task named by its schedule time
  assert.equal(recorded.length, taken, 'as many fires as the schedule took actions');
  assert.equal(new Set(recorded.map((f) => f.taskId)).size, recorded.length, 'no taskId twice');
  for (const fire of recorded) {
    assert.equal(fire.result, 'success', JSON.stringify(fire));
    assert.equal(fire.taskId, scheduledTaskId(await fireIdKey(stack.api.db.pool), hook.hookGroupId, hook.hookId, new Date(fire.taskCreateTime)));
  }
  // none lost: the schedule times are consecutive, the outage's included (taken late, when the server was back)
  const times = recorded.map((f) => Date.parse(f.taskCreateTime)).sort((a, b) => a - b);
  for (let i = 1; i < times.length; i++) assert.equal(times[i] - times[i - 1], STEP_MS, `fire ${new Date(times[i]).toISOString()} follows the one before by one step`);
  const missedWhileDown = times.filter((t) => t > killedAt && t < upAt);
  assert.ok(missedWhileDown.length >= 3, `the ${missedWhileDown.length} schedule times of the outage fired after it`);
  // Temporal's record of its latest actions: each fired; those after the restart were taken on time
  assert.ok(description.info.recentActions.length > 0);
  for (const action of description.info.recentActions) {
    const at = action.scheduledAt.toISOString();
    assert.ok(recorded.some((f) => f.taskCreateTime === at), `the action at ${at} fired`);
    if (action.scheduledAt.getTime() > upAt + STEP_MS) {
      const lateMs = action.takenAt.getTime() - action.scheduledAt.getTime();
      assert.ok(lateMs < STEP_MS, `the action at ${at} was taken ${lateMs} ms late`);
    }
  }
  const { rows } = await stack.api.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM tasks WHERE task_id = ANY($1)', [recorded.map((f) => f.taskId)]);
  assert.equal(rows[0].n, taken);
});
