import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import slugid from 'slugid';
import { createTestDatabase, outboxCount, type TestDatabase } from '../../support/db.js';
import { fastTask } from '../../support/graphs.js';
import { loadConfig } from '../../src/config.js';
import { withTransaction } from '../../src/db/pool.js';
import { OUTBOX_COLUMNS, type OutboxRow } from '../../src/relay/outboxStore.js';
import { outboxMessage } from '../../src/relay/outboxMessage.js';
import { createTasks } from '../../src/queue/createTasks.js';
import { validateTaskDefinition, type TaskDefinition } from '../../src/queue/definition.js';
import { taskMessage } from '../../src/queue/messages.js';
import { scheduleTasks } from '../../src/queue/scheduleTasks.js';
import { loadTasks } from '../../src/queue/taskRow.js';

// scheduleTasks is one statement (lock, add run 0, write the task-pending row the relay renders): what it stores
// and announces must be what the queue's JavaScript builds for the same change (addPendingRun, taskMessage).

let db: TestDatabase;
const config = loadConfig({});
const taskGroupId = slugid.nice();

before(async () => {
  db = await createTestDatabase();
});
after(async () => {
  await db.drop();
});

async function create(name: string, extra: Record<string, unknown> = {}): Promise<string> {
  const taskId = slugid.nice();
  const checked = validateTaskDefinition({ ...fastTask(name), taskGroupId, routes: ['index.sched'], ...extra }, taskId, new Date());
  assert.ok('definition' in checked, JSON.stringify(checked));
  await withTransaction(db.pool, (client) => createTasks(client, config, [{ taskId, definition: checked.definition as TaskDefinition }]));
  return taskId;
}

test('schedules unscheduled tasks before their deadline, once, with the run and the task-pending message the queue builds', async () => {
  const required = await create('required');
  const [b, c, late] = [await create('b', { dependencies: [required] }), await create('c', { dependencies: [required] }), await create('late', { dependencies: [required] })];
  await db.pool.query(`UPDATE tasks SET deadline = now() - interval '1 second' WHERE task_id = $1`, [late]);
  await db.pool.query('DELETE FROM outbox');

  const startedAt = Date.now();
  const statuses = await withTransaction(db.pool, (client) => scheduleTasks(client, config, [b, c, late, required, b, slugid.nice()]));
  assert.deepEqual(statuses.map((s) => [s.taskId, s.state]), [[b, 'pending'], [c, 'pending'], [late, 'unscheduled'], [required, 'pending']], 'in the order asked, once each, unknown ids left out');
  for (const s of statuses.slice(0, 2)) {
    assert.equal(s.runs.length, 1);
    const { scheduled, ...run } = s.runs[0];
    assert.deepEqual(run, { runId: 0, state: 'pending', reasonCreated: 'scheduled' });
    assert.ok(Date.parse(scheduled) >= startedAt - 5 && Date.parse(scheduled) <= Date.now() + 5, scheduled);
    assert.equal(scheduled, new Date(scheduled).toISOString(), 'an ISO time as JavaScript writes it');
  }
  assert.deepEqual(statuses[2].runs, [], 'past its deadline: left unscheduled');

  const rows = await loadTasks(db.pool, [b, c]);
  const stored = await db.pool.query<{ task_id: string; pending_since: Date }>('SELECT task_id, pending_since FROM tasks WHERE task_id = ANY($1)', [[b, c]]);
  for (const r of stored.rows) assert.equal(r.pending_since.toISOString(), rows.find((t) => t.task_id === r.task_id)?.runs[0].scheduled);
  const outbox = await db.pool.query<OutboxRow>(`SELECT ${OUTBOX_COLUMNS} FROM outbox ORDER BY id`);
  assert.equal(outbox.rows.length, 2, 'one task-pending row for each task scheduled');
  for (const row of outbox.rows) {
    const rendered = outboxMessage(config, row);
    const task = rows.find((t) => t.task_id === rendered.messageId.split('/')[0]);
    assert.ok(task);
    const expected = taskMessage(config, 'task-pending', task, 0);
    assert.deepEqual(rendered, { ...expected, cc: expected.cc ?? [] });
    assert.deepEqual(rendered.cc, ['route.index.sched']);
  }

  const again = await withTransaction(db.pool, (client) => scheduleTasks(client, config, [b, c]));
  assert.deepEqual(again.map((s) => s.runs.length), [1, 1], 'scheduling again adds no run');
  assert.equal(await outboxCount(db.pool), 2, 'and no message');
});
