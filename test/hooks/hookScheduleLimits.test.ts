import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { checkScheduleInterval, shortestGapS } from '../../src/hooks/scheduleInterval.js';
import { expireLastFires } from '../../src/hooks/lastFiresSweep.js';
import { ok } from './hookStack.js';

/*
 * Security review 2026-11-28, finding 10: a hook's schedule may fire at most once every TGS_HOOK_MIN_INTERVAL_S (60 s
 * by default), and its recorded fires are kept a bounded time and number.
 */

let t: TestApi;
before(async () => {
  // no Temporal: a refused schedule never reaches it, and the sweep is called here, not waited for
  t = await startTestApi({ temporalAddress: '127.0.0.1:1' });
});
after(async () => {
  await t?.close();
});

const metadata = { name: 'limits', description: 'schedule limits', owner: 'hooks@example.com' };

test('the review\'s every-second schedule is refused (400, saying the bound and how to write one), and nothing is written', async () => {
  for (const schedule of [['* * * * * *', '@every 1s'], ['* * * * * *'], ['@every 1s'], ['*/30 * * * * *'], ['0,30 * * * * *'], ['0 * * * * *', '30 * * * * *'], ['@every 59s']]) {
    const res = await t.request('PUT', '/api/hooks/v1/hooks/limits/fast', { metadata, schedule, task: fastTask('fast') });
    assert.equal(res.status, 400, JSON.stringify(schedule));
    assert.equal(res.body.code, 'InputError');
    assert.match(res.body.message, /a hook fires at most once every 60 s \(TGS_HOOK_MIN_INTERVAL_S\)/);
    assert.equal((await t.request('GET', '/api/hooks/v1/hooks/limits/fast')).status, 404);
  }
});

test('the shortest gap of a schedule is bounded from below across its patterns and across midnight', () => {
  const cases: [string[], number][] = [
    [['* * * * * *'], 1],
    [['*/2 * * * * *'], 2],
    [['0 * * * * *'], 60],
    [['* * * * *'], 60],
    [['*/5 * * * *'], 300],
    [['0 0 3 * * *'], 86_400],
    [['0 3 * * *', '1 3 * * *'], 60],
    [['0 0 0 * * *', '59 59 23 * * *'], 1], // across midnight
    [['0 10-20/5 * * * *'], 300],
    [['@hourly'], 3600],
    [['@every 10m'], 600],
    [['@daily', '0 0 0 * * *'], 86_400],
    [['0 0 3 1 JAN *'], 86_400], // day fields only remove days
  ];
  for (const [patterns, gap] of cases) assert.equal(shortestGapS(patterns), gap, JSON.stringify(patterns));
  assert.doesNotThrow(() => checkScheduleInterval(['0 * * * * *'], 60));
  assert.throws(() => checkScheduleInterval(['*/2 * * * * *'], 60), /may fire 2 s apart/);
  assert.doesNotThrow(() => checkScheduleInterval(['*/2 * * * * *'], 2));
  assert.doesNotThrow(() => checkScheduleInterval(['* * * * * *'], 0), 'TGS_HOOK_MIN_INTERVAL_S=0 turns the bound off');
});

test('last fires expire: older than TGS_HOOK_LAST_FIRES_DAYS, or beyond TGS_HOOK_LAST_FIRES_MAX newest a hook', async () => {
  ok(await t.request('PUT', '/api/hooks/v1/hooks/limits/fired', { metadata, task: fastTask('fired') }));
  ok(await t.request('PUT', '/api/hooks/v1/hooks/limits/other', { metadata, task: fastTask('other') }));
  const now = Date.now();
  // 1,005 recent fires of `fired`, 3 of `other`, and 2 of `other` from 40 days ago
  await t.db.pool.query(
    `INSERT INTO hook_last_fires (hook_group_id, hook_id, task_id, fired_by, task_create_time, result)
     SELECT 'limits', h, 'task-' || h || '-' || n, 'triggerHookWithToken', to_timestamp(($1::float8 - n * $2::float8) / 1000), 'success'
       FROM (SELECT 'fired' AS h, generate_series(0, 1004) AS n UNION ALL SELECT 'other', generate_series(0, 2)
             UNION ALL SELECT 'other', generate_series(40 * 86400, 40 * 86400 + 1)) f`,
    [now, 1000],
  );
  const deleted = await expireLastFires(t.db.pool, { hookLastFiresDays: 30, hookLastFiresMax: 1000 });
  assert.equal(deleted, 5 + 2);
  const { rows } = await t.db.pool.query<{ hook_id: string; n: number; oldest: Date }>(
    `SELECT hook_id, count(*)::int AS n, min(task_create_time) AS oldest FROM hook_last_fires WHERE hook_group_id = 'limits' GROUP BY hook_id ORDER BY hook_id`,
  );
  assert.deepEqual(rows.map((r) => [r.hook_id, r.n]), [['fired', 1000], ['other', 3]]);
  // the newest kept: the oldest left of `fired` is its 1000th newest
  assert.equal(rows[0].oldest.getTime(), now - 999 * 1000);
  assert.equal(await expireLastFires(t.db.pool, { hookLastFiresDays: 30, hookLastFiresMax: 1000 }), 0);
});
