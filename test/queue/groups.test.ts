import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { startTestApi, type TestApi } from '../../support/api.js';
import { fastTask } from '../../support/graphs.js';
import { eventually } from '../../support/stack.js';

let t: TestApi;
before(async () => {
  // sweeps every 200 ms: deadlines and expiry happen within the test
  t = await startTestApi({ claimWorkWaitMs: 500, sweepIntervalMs: 200 });
});
after(async () => {
  await t.close();
});

type Creds = Parameters<TestApi['request']>[3];
const q = (method: string, path: string, body?: unknown, creds?: Creds) => t.request(method, `/api/queue/v1${path}`, body, creds);

async function create(taskGroupId: string, workerType: string, extra: Record<string, unknown> = {}, taskId = slugid.nice()) {
  const res = await q('PUT', `/task/${taskId}`, { ...fastTask(taskId), taskGroupId, workerType, ...extra });
  assert.equal(res.status, 200, JSON.stringify(res.body));
  return taskId;
}

async function claimAll(workerType: string, count: number) {
  const claimed: { status: { taskId: string }; runId: number; credentials: Creds }[] = [];
  while (claimed.length < count) {
    const res = await q('POST', `/claim-work/tgs-test/${workerType}`, { workerGroup: 'g', workerId: 'w', tasks: count - claimed.length });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assert.ok(res.body.tasks.length > 0, `tasks to claim for ${workerType}`);
    claimed.push(...res.body.tasks);
  }
  return claimed;
}

const complete = async (c: { status: { taskId: string }; runId: number; credentials: Creds }) => {
  const res = await q('POST', `/task/${c.status.taskId}/runs/${c.runId}/completed`, undefined, c.credentials);
  assert.equal(res.status, 200, JSON.stringify(res.body));
};

/**
 * task-group-resolved messages written for a group (no relay runs here, so the outbox keeps them), once
 * the API's announcer has checked the groups of the reports made so far.
 */
async function groupResolvedCount(taskGroupId: string): Promise<number> {
  await t.api.deps.groupAnnouncer.flush();
  const { rows } = await t.db.pool.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM outbox WHERE exchange = 'queue/v1/task-group-resolved' AND routing_key LIKE $1`,
    [`%.${taskGroupId}._`],
  );
  return rows[0].n;
}

test('task-group-resolved is written once when the last task resolves, even when the last ones resolve together', async () => {
  const groups = Array.from({ length: 8 }, () => slugid.nice());
  await Promise.all(
    groups.map(async (g, i) => {
      for (let k = 0; k < 6; k++) await create(g, `grp-race-${i}`);
      const claimed = await claimAll(`grp-race-${i}`, 6);
      for (const c of claimed.slice(0, 4)) await complete(c);
      assert.equal(await groupResolvedCount(g), 0, 'not while tasks are unresolved');
      // the last two resolve in concurrent transactions: each must see the other's resolution or wait for it
      await Promise.all(claimed.slice(4).map(complete));
    }),
  );
  for (const g of groups) assert.equal(await groupResolvedCount(g), 1, `group ${g} resolved exactly once`);

  // a new task reopens the group; its resolution announces the group again
  const reopened = groups[0];
  await create(reopened, 'grp-race-again');
  const [c] = await claimAll('grp-race-again', 1);
  assert.equal(await groupResolvedCount(reopened), 1);
  await complete(c);
  assert.equal(await groupResolvedCount(reopened), 2);
});

test('an unscheduled task keeps its group unresolved', async () => {
  const g = slugid.nice();
  const first = await create(g, 'grp-unsched');
  await create(g, 'grp-unsched', { dependencies: [first] });
  const [c] = await claimAll('grp-unsched', 1);
  assert.equal(c.status.taskId, first);
  await complete(c);
  assert.equal(await groupResolvedCount(g), 0, 'the dependent task is still unscheduled');
});

test('a sealed group refuses new tasks but accepts an identical retry of an existing one', async () => {
  const g = slugid.nice();
  const existing = slugid.nice();
  const definition = { ...fastTask(existing), taskGroupId: g, workerType: 'grp-seal' };
  assert.equal((await q('PUT', `/task/${existing}`, definition)).status, 200);
  const sealed = await q('POST', `/task-group/${g}/seal`);
  assert.equal(sealed.status, 200);
  assert.ok(sealed.body.sealed, 'sealed time shown');
  const again = await q('POST', `/task-group/${g}/seal`);
  assert.equal(again.body.sealed, sealed.body.sealed, 'sealing again keeps the first time');
  const fresh = slugid.nice();
  const refused = await q('PUT', `/task/${fresh}`, { ...fastTask(fresh), taskGroupId: g, workerType: 'grp-seal' });
  assert.equal(refused.status, 409);
  assert.equal(refused.body.code, 'RequestConflict');
  assert.match(refused.body.message, /sealed/);
  assert.equal((await q('GET', `/task/${fresh}`, undefined, null)).status, 404, 'nothing written');
  assert.equal((await q('PUT', `/task/${existing}`, definition)).status, 200, 'idempotent retry of an existing task');
  assert.equal((await q('GET', `/task-group/${g}`, undefined, null)).body.sealed, sealed.body.sealed);
});

test('the tasks of one group leave its row as it is: its expires grows an hour at a time, as Taskcluster\'s does', async () => {
  const g = slugid.nice();
  const now = Date.now();
  const at = (ms: number) => new Date(now + ms).toISOString();
  const hour = 3600_000;
  const version = async () => (await t.db.pool.query<{ v: string }>('SELECT xmin::text AS v FROM task_groups WHERE task_group_id = $1', [g])).rows[0].v;
  const groupExpires = async () => Date.parse((await q('GET', `/task-group/${g}`, undefined, null)).body.expires);
  await create(g, 'grp-expires', { expires: at(10 * hour) });
  assert.equal(await groupExpires(), now + 11 * hour, 'a new group expires an hour after its task');
  const first = await version();
  // later tasks within that hour, and one expiring sooner: the row is not written again
  await Promise.all([at(10 * hour + 1000), at(10 * hour + 30 * 60_000), at(2 * hour)].map((expires) => create(g, 'grp-expires', { expires })));
  assert.equal(await version(), first, 'no new version of the group row');
  assert.equal(await groupExpires(), now + 11 * hour);
  // a task expiring past the group: bumped to that task's expires and an hour
  await create(g, 'grp-expires', { expires: at(12 * hour) });
  assert.notEqual(await version(), first);
  assert.equal(await groupExpires(), now + 13 * hour, 'the group outlives its latest task');
});

test('a task naming another schedulerId than its group has is refused with nothing written', async () => {
  const g = slugid.nice();
  const first = slugid.nice();
  assert.equal((await q('PUT', `/task/${first}`, { ...fastTask(first), taskGroupId: g, schedulerId: 'sched-a', workerType: 'grp-sched' })).status, 200);
  const other = slugid.nice();
  const refused = await q('PUT', `/task/${other}`, { ...fastTask(other), taskGroupId: g, schedulerId: 'sched-b', workerType: 'grp-sched', dependencies: [first] });
  assert.equal(refused.status, 409);
  assert.equal(refused.body.code, 'RequestConflict');
  assert.match(refused.body.message, /belongs to schedulerId sched-a/);
  assert.equal((await q('GET', `/task/${other}`, undefined, null)).status, 404, 'no task row');
  const dependents = await q('GET', `/task/${first}/dependents`, undefined, null);
  assert.deepEqual(dependents.body.tasks, [], 'no dependency edge');
});

test('cancelTaskGroup cancels every unresolved task of a sealed group (Taskcluster: only a sealed one)', async () => {
  const g = slugid.nice();
  const done = await create(g, 'grp-cancel');
  const [doneClaim] = await claimAll('grp-cancel', 1);
  assert.equal(doneClaim.status.taskId, done);
  await complete(doneClaim);
  // The announcement follows the report (GroupAnnouncer); let it happen before the group gets a new task,
  // which would reopen it first (Taskcluster's resolver announces asynchronously too).
  assert.equal(await groupResolvedCount(g), 1, 'announced when its first task completed alone');
  const running = await create(g, 'grp-cancel');
  const [runningClaim] = await claimAll('grp-cancel', 1);
  const pending = await create(g, 'grp-cancel');
  const unscheduled = await create(g, 'grp-cancel', { dependencies: [pending] });

  const unsealed = await q('POST', `/task-group/${g}/cancel`);
  assert.equal(unsealed.status, 409, 'an unsealed group cannot be canceled');
  assert.equal((await q('GET', `/task/${pending}/status`, undefined, null)).body.status.state, 'pending');

  assert.equal((await q('POST', `/task-group/${g}/seal`)).status, 200);
  assert.equal(await groupResolvedCount(g), 1, 'announced once, and not again while tasks were unresolved');
  const res = await q('POST', `/task-group/${g}/cancel`);
  assert.equal(res.status, 200, JSON.stringify(res.body));
  assert.equal(res.body.taskGroupId, g);
  assert.equal(res.body.taskGroupSize, 4);
  assert.equal(res.body.cancelledCount, 3);
  assert.deepEqual([...res.body.taskIds].sort(), [running, pending, unscheduled].sort());
  for (const id of [running, pending, unscheduled]) {
    const s = (await q('GET', `/task/${id}/status`, undefined, null)).body.status;
    assert.equal(s.state, 'exception', id);
    assert.equal(s.runs[s.runs.length - 1].reasonResolved, 'canceled');
  }
  assert.equal((await q('GET', `/task/${done}/status`, undefined, null)).body.status.state, 'completed');
  const late = await q('POST', `/task/${running}/runs/0/completed`, undefined, runningClaim.credentials);
  assert.equal(late.status, 409, 'the canceled run cannot be completed');
  assert.equal(await groupResolvedCount(g), 2, 'announced again once the cancel resolved the rest');
  const twice = await q('POST', `/task-group/${g}/cancel`);
  assert.equal(twice.body.cancelledCount, 0);
  assert.deepEqual(twice.body.taskIds, []);
  assert.equal(await groupResolvedCount(g), 2, 'nothing changed: no new announcement');
});

test('expiry removes expired tasks, their dependencies, artifacts and groups; the rest stays', async () => {
  const now = Date.now();
  const short = { deadline: new Date(now + 1000).toISOString(), expires: new Date(now + 2000).toISOString() };
  const g = slugid.nice();
  const a = await create(g, 'grp-expire', short);
  const b = await create(g, 'grp-expire', { ...short, dependencies: [a] });
  await t.db.pool.query(
    `INSERT INTO artifacts (task_id, run_id, name, storage_type, content_type, expires, details) VALUES ($1, 0, 'public/x', 'error', 'application/json', $2, '{}')`,
    [a, short.expires],
  );
  const keepGroup = slugid.nice();
  const keep = await create(keepGroup, 'grp-expire');
  const oldArtifactOnKeep = new Date(now + 1500).toISOString();
  await t.db.pool.query(
    `INSERT INTO artifacts (task_id, run_id, name, storage_type, content_type, expires, details)
     VALUES ($1, 0, 'public/old', 'error', 'application/json', $2, '{}'), ($1, 0, 'public/new', 'error', 'application/json', now() + interval '1 day', '{}')`,
    [keep, oldArtifactOnKeep],
  );

  await eventually(async () => (await q('GET', `/task/${a}`, undefined, null)).status === 404, 'expired task removed', 15_000);
  assert.equal((await q('GET', `/task/${b}`, undefined, null)).status, 404);
  const count = async (sql: string, params: unknown[]) => (await t.db.pool.query<{ n: number }>(sql, params)).rows[0].n;
  assert.equal(await count('SELECT count(*)::int AS n FROM task_dependencies WHERE required_task_id = $1 OR dependent_task_id = $1', [a]), 0);
  assert.equal(await count('SELECT count(*)::int AS n FROM artifacts WHERE task_id = $1', [a]), 0);
  // the group outlives its tasks by up to an hour (its expires grows an hour at a time): that hour passes here
  assert.equal((await q('GET', `/task-group/${g}`, undefined, null)).status, 200, 'the group is kept until its own expires');
  await t.db.pool.query(`UPDATE task_groups SET expires = expires - interval '1 hour' WHERE task_group_id = $1`, [g]);
  await eventually(async () => (await q('GET', `/task-group/${g}`, undefined, null)).status === 404, 'expired group removed', 15_000);

  assert.equal((await q('GET', `/task/${keep}`, undefined, null)).status, 200, 'a task that has not expired stays');
  assert.equal((await q('GET', `/task-group/${keepGroup}`, undefined, null)).status, 200);
  const names = (await t.db.pool.query<{ name: string }>('SELECT name FROM artifacts WHERE task_id = $1 ORDER BY name', [keep])).rows.map((r) => r.name);
  assert.deepEqual(names, ['public/new'], 'an expired artifact of a live task goes, a live one stays');
});
