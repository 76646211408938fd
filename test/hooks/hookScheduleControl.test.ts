import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { scheduleIdFor } from '../../src/hooks/schedules.js';
import { fireIdKey, scheduledTaskId } from '../../src/hooks/fireTaskId.js';
import { hookScheduleSweep } from '../../src/hooks/reconcileSweep.js';
import { LazyTemporalClient } from '../../src/temporal/connection.js';
import { eventually, type Stack } from '../../support/stack.js';
import { ok, stackWithHookRole } from './hookStack.js';
import { fastTask, graphOf } from '../../support/graphs.js';
import { createHash } from 'node:crypto';
import slugid from 'slugid';
import { fireHook } from '../../src/hooks/fire.js';
import { getHook, getLastFire } from '../../src/hooks/store.js';

/*
 * tgs's extensions of the Hooks service on the real stack: pause and unpause, the overlap policy and catch-up window,
 * and a backfill that fires once per past schedule time with `now` set to that time.
 */

let stack: Stack;
before(async () => {
  // an every-second schedule is backfilled below: allowed with TGS_HOOK_MIN_INTERVAL_S=1
  stack = await stackWithHookRole('control', 'controlled hooks', { configOverrides: { hookMinIntervalS: 1 } });
});
after(async () => {
  await stack?.stop();
});


const daily = (name: string) => ({
  metadata: { name, description: 'daily at 03:00', owner: 'hooks@example.com' },
  schedule: ['0 0 3 * * *'],
  // no `created` from `now`: a backfilled fire's `now` is days old, the queue takes a task created within 15 minutes
  task: { ...fastTask(name), created: undefined, deadline: undefined, payload: { at: '${now}' } },
});

test('backfill fires once per past schedule time with `now` at that time; backfilling it again creates nothing new', async () => {
  const base = '/api/hooks/v1/hooks/control/backfilled';
  ok(await stack.api.request('PUT', base, daily('backfilled')));
  // paused: only the backfill fires (and a paused schedule backfills)
  assert.equal(ok(await stack.api.request('POST', `${base}/pause`)).paused, true);
  const day = 86400_000;
  const today3 = Math.floor((Date.now() - 3 * 3600_000) / day) * day + 3 * 3600_000;
  const range = { start: new Date(today3 - 3 * day - 1000).toISOString(), end: new Date(today3 - day + 1000).toISOString() };
  const expected = [today3 - day, today3 - 2 * day, today3 - 3 * day].map((ms) => new Date(ms).toISOString());
  ok(await stack.api.request('POST', `${base}/backfill`, range));
  const fired = await eventually(async () => {
    const res = await stack.api.request('GET', `${base}/last-fires`);
    return res.status === 200 && res.body.lastFires.length >= 3 ? res.body.lastFires : undefined;
  }, 'three backfilled fires');
  assert.deepEqual(fired.map((f: { taskCreateTime: string }) => f.taskCreateTime), expected);
  for (const fire of fired) {
    assert.equal(fire.result, 'success', fire.error);
    assert.equal(fire.firedBy, 'schedule');
    assert.equal(fire.taskId, scheduledTaskId(await fireIdKey(stack.api.db.pool), 'control', 'backfilled', new Date(fire.taskCreateTime)));
    assert.deepEqual(ok(await stack.api.request('GET', `/api/queue/v1/task/${fire.taskId}`)).payload, { at: fire.taskCreateTime });
  }

  ok(await stack.api.request('POST', `${base}/backfill`, range));
  const handle = stack.client.schedule.getHandle(scheduleIdFor({ hookGroupId: 'control', hookId: 'backfilled' }));
  // 90 s, not eventually's 30: at a load average of 13 (the suite beside two benches) the schedule took longer than 30 s
  // to take the second backfill's three actions, which it does alone in a few
  await eventually(async () => (await handle.describe()).info.numActionsTaken >= 6, 'the second backfill\'s actions taken', 90_000);
  // its three workflows ran to their end: same tasks, no new fires
  await eventually(async () => {
    const { rows } = await stack.api.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM hook_last_fires');
    const running = [];
    for await (const w of stack.client.workflow.list({ query: `WorkflowType = 'hookFire' AND ExecutionStatus = 'Running'` })) running.push(w);
    return rows[0].n === 3 && running.length === 0;
  }, 'the second backfill settled');
  assert.equal((await stack.api.request('GET', `${base}/last-fires`)).body.lastFires.length, 3);

  const refused = await stack.api.request('POST', `${base}/backfill`, { start: range.end, end: range.start });
  assert.equal(refused.status, 400);
  const future = await stack.api.request('POST', `${base}/backfill`, { start: range.start, end: new Date(Date.now() + day).toISOString() });
  assert.equal(future.status, 400);
  ok(await stack.api.request('PUT', '/api/hooks/v1/hooks/control/every-second', { ...daily('every second'), schedule: ['* * * * * *'] }));
  const tooMany = await stack.api.request('POST', '/api/hooks/v1/hooks/control/every-second/backfill', { start: new Date(Date.now() - 3600_000).toISOString(), end: new Date().toISOString() });
  assert.equal(tooMany.status, 400);
  assert.match(tooMany.body.message, /1000 schedule times or more/);
  ok(await stack.api.request('DELETE', '/api/hooks/v1/hooks/control/every-second'));
});

test('pause and unpause reach the Temporal Schedule; the policy is the schedule\'s; a lost pause is put back', async () => {
  const base = '/api/hooks/v1/hooks/control/paused';
  const handle = stack.client.schedule.getHandle(scheduleIdFor({ hookGroupId: 'control', hookId: 'paused' }));
  ok(await stack.api.request('PUT', base, daily('paused')));
  const initial = ok(await stack.api.request('GET', `${base}/schedule`));
  assert.equal(initial.paused, false);
  assert.equal(initial.overlap, 'ALLOW_ALL');
  assert.equal(initial.catchupWindowSeconds, 86400);
  assert.ok(initial.nextScheduledDates[0].endsWith('T03:00:00.000Z'));

  ok(await stack.api.request('POST', `${base}/pause`));
  assert.equal((await handle.describe()).state.paused, true);
  const policy = ok(await stack.api.request('PUT', `${base}/schedule-policy`, { overlap: 'SKIP', catchupWindowSeconds: 600 }));
  assert.deepEqual([policy.paused, policy.overlap, policy.catchupWindowSeconds], [true, 'SKIP', 600]);
  let described = await handle.describe();
  assert.equal(described.policies.overlap, 'SKIP');
  assert.equal(described.policies.catchupWindow, 600_000);
  assert.equal(described.state.paused, true, 'changing the policy keeps the pause');

  // updateHook keeps the pause and the policy
  ok(await stack.api.request('POST', base, { ...daily('paused'), schedule: ['0 0 4 * * *'] }));
  described = await handle.describe();
  assert.deepEqual([described.state.paused, described.policies.overlap], [true, 'SKIP']);

  // Temporal's state changed behind tgs's back: reconciliation puts the hook's back
  await handle.unpause();
  const temporal = new LazyTemporalClient(stack.config);
  try {
    await hookScheduleSweep(stack.api.db.pool, stack.config, temporal)();
  } finally {
    await temporal.close();
  }
  assert.equal((await handle.describe()).state.paused, true);

  ok(await stack.api.request('POST', `${base}/unpause`));
  assert.equal((await handle.describe()).state.paused, false);
  const invalid = await stack.api.request('PUT', `${base}/schedule-policy`, { overlap: 'SOMETIMES' });
  assert.equal(invalid.status, 400);
  const tooShort = await stack.api.request('PUT', `${base}/schedule-policy`, { catchupWindowSeconds: 1 });
  assert.equal(tooShort.status, 400);
});

test('a hook whose template renders a task-graph fires the whole graph as its role; without the graph scope it is refused', async () => {
  ok(await stack.api.request('PUT', `/api/auth/v1/roles/${encodeURIComponent('hook-id:graphs/*')}`, {
    description: 'graph hooks',
    scopes: ['scheduler:create-task-graph', 'queue:create-task:lowest:tgs-test/fast', `queue:scheduler-id:${stack.config.schedulerId}`],
  }));
  const graphHook = {
    metadata: { name: 'nightly graph', description: 'a graph a night', owner: 'hooks@example.com' },
    task: {
      routing: 'hooks',
      metadata: { name: 'nightly ${firedBy}' },
      tasks: {
        build: { task: { ...fastTask('build'), created: undefined, deadline: undefined } },
        test: { requires: ['build'], task: { ...fastTask('test'), created: undefined, deadline: undefined, payload: { outcomes: ['completed'], at: '${now}' } } },
      },
    },
  };
  ok(await stack.api.request('PUT', '/api/hooks/v1/hooks/graphs/nightly', graphHook));
  const { taskId: taskGraphId } = ok(await stack.api.request('POST', '/api/hooks/v1/hooks/graphs/nightly/trigger', {}));
  const info = ok(await stack.api.request('GET', `/api/scheduler/v1/task-graph/${taskGraphId}/info`));
  assert.equal(info.metadata.name, 'nightly triggerHook');
  // the graph's workflow runs: it schedules the root, `test` waits for it
  await eventually(async () => {
    const { tasks } = ok(await stack.api.request('GET', `/api/queue/v1/task-group/${taskGraphId}/list`));
    const states = tasks.map((t: { task: { metadata: { name: string } }; status: { state: string } }) => `${t.task.metadata.name}:${t.status.state}`).sort();
    return states.join(' ') === 'build:pending test:unscheduled';
  }, 'the graph\'s workflow scheduled its root');

  ok(await stack.api.request('PUT', `/api/auth/v1/roles/${encodeURIComponent('hook-id:graphs-denied/*')}`, {
    description: 'no graph scope',
    scopes: ['queue:create-task:lowest:tgs-test/fast', `queue:scheduler-id:${stack.config.schedulerId}`],
  }));
  ok(await stack.api.request('PUT', '/api/hooks/v1/hooks/graphs-denied/nightly', graphHook));
  const refused = await stack.api.request('POST', '/api/hooks/v1/hooks/graphs-denied/nightly/trigger', {});
  assert.equal(refused.status, 403, JSON.stringify(refused.body));
  assert.match(refused.body.message, /^The role `hook-id:graphs-denied\/nightly` does not have sufficient scopes to create the task-graph:\n\n.*scheduler:create-task-graph/s);
  const { lastFires } = ok(await stack.api.request('GET', '/api/hooks/v1/hooks/graphs-denied/nightly/last-fires'));
  assert.equal(lastFires[0].result, 'error');
  assert.equal((await stack.api.request('GET', `/api/scheduler/v1/task-graph/${lastFires[0].taskId}/info`)).status, 404);
});

test('security review 2026-11-28 #3: a fire id is not computable from public data, and a graph created under it first is refused, never recorded as the fire', async () => {
  ok(await stack.api.request('PUT', `/api/auth/v1/roles/${encodeURIComponent('hook-id:squat/*')}`, {
    description: 'graph hooks',
    scopes: ['scheduler:create-task-graph', 'queue:create-task:lowest:tgs-test/fast', `queue:scheduler-id:${stack.config.schedulerId}`],
  }));
  ok(await stack.api.request('PUT', '/api/hooks/v1/hooks/squat/graphsched', {
    metadata: { name: 'official nightly', description: 'the official nightly graph', owner: 'hooks@example.com' },
    task: { metadata: { name: 'official nightly' }, tasks: { build: { task: { ...fastTask('official build'), created: undefined, deadline: undefined } } } },
  }));
  const hook = (await getHook(stack.api.db.pool, 'squat', 'graphsched'))!;
  const at = new Date(Math.ceil(Date.now() / 60_000) * 60_000);
  const key = await fireIdKey(stack.api.db.pool);
  const taskId = scheduledTaskId(key, 'squat', 'graphsched', at);
  // the review computed ids as the digest of (hookGroupId, hookId, time): public data
  const bytes = createHash('sha256').update(JSON.stringify(['squat', 'graphsched', at.toISOString()])).digest().subarray(0, 16);
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  assert.notEqual(taskId, bytes.toString('base64url'));
  assert.notEqual(taskId, scheduledTaskId(`${key}x`, 'squat', 'graphsched', at), 'the id depends on the deployment\'s key');

  // were the id known anyway: a graph under it, made first, is not the render, so the fire is refused, not counted
  ok(await stack.api.request('PUT', `/api/scheduler/v1/task-graph/${taskId}`, graphOf({ attacker: { payload: { run: 'echo ATTACKER' } } })));
  const temporal = new LazyTemporalClient(stack.config);
  try {
    const env = { pool: stack.api.db.pool, config: stack.config, temporal };
    const squatted = await fireHook(env, hook, { firedBy: 'schedule' }, { taskId, now: at });
    assert.equal(squatted.result, 'refused');
    assert.match((squatted as { error: Error }).error.message, /RequestConflict/);
    assert.equal((await getLastFire(stack.api.db.pool, 'squat', 'graphsched', taskId))?.result, 'error');

    // a free id: the graph and its fire commit together, so a retry (the activity looks for the fire first) does nothing
    const next = new Date(at.getTime() + 60_000);
    const freeId = scheduledTaskId(key, 'squat', 'graphsched', next);
    assert.equal((await fireHook(env, hook, { firedBy: 'schedule' }, { taskId: freeId, now: next })).result, 'created');
    assert.equal((await getLastFire(stack.api.db.pool, 'squat', 'graphsched', freeId))?.result, 'success');
    assert.equal(ok(await stack.api.request('GET', `/api/scheduler/v1/task-graph/${freeId}/info`)).metadata.name, 'official nightly');
    // a graph that is exactly the render (a trigger answered twice under one id) is the fire
    const again = slugid.nice();
    assert.equal((await fireHook(env, hook, { firedBy: 'schedule' }, { taskId: again, now: next, firedAt: next })).result, 'created');
    await stack.api.db.pool.query("DELETE FROM hook_last_fires WHERE task_id = $1", [again]);
    assert.equal((await fireHook(env, hook, { firedBy: 'schedule' }, { taskId: again, now: next, firedAt: next })).result, 'created');
    assert.equal((await getLastFire(stack.api.db.pool, 'squat', 'graphsched', again))?.result, 'success');
  } finally {
    await temporal.close();
  }
});
