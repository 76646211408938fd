import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import slugid from 'slugid';
import { eventually, stackEnv } from '../../support/stack.js';
import type { ClaimedTask } from '../../support/fastWorker.js';
import { useStack } from '../helpers/stackFixture.js';
import { fastTask } from '../../support/graphs.js';

/*
 * Scheduler workers killed (SIGKILL) around an amend (docs/formats.md § Amend): one dies before the amend reaches the
 * workflow, so the endpoint's update waits for the next worker; that one dies right after applying it, while the new
 * nodes load and dispatch. Every changed label gets exactly one new task with exactly one run, and the old ones none.
 */
let schedulerWorker: ChildProcess | undefined;
const claims: string[] = [];

function spawnSchedulerWorker(): ChildProcess {
  const child = spawn(process.execPath, ['--import', 'tsx', 'src/cli/entry.ts', 'scheduler-worker'], { env: { ...process.env, ...stackEnv(stack) }, stdio: ['ignore', 'pipe', 'pipe'] });
  for (const stream of [child.stdout, child.stderr]) stream?.on('data', (d: Buffer) => process.env.TGS_TEST_VERBOSE && process.stderr.write(`[worker] ${d}`));
  return child;
}
const exited = (child: ChildProcess) => new Promise((resolve) => (child.exitCode !== null || child.signalCode ? resolve(null) : child.once('exit', resolve)));
async function kill(child: ChildProcess | undefined) {
  if (!child) return;
  child.kill('SIGKILL');
  await exited(child);
}

const stack = useStack({
  inProcessWorker: false,
  worker: { provisionerId: 'tgs-test', workerType: 'amend-kill', concurrency: 4, onClaim: (t: ClaimedTask) => claims.push(t.taskId) },
});
stack.onStart(() => {
  schedulerWorker = spawnSchedulerWorker();
});
stack.onStop(async () => {
  await kill(schedulerWorker);
});

const file = (buildOutcome: 'completed' | 'failed') => ({
  tasks: {
    build: { task: { ...fastTask('build', [buildOutcome], { fixed: buildOutcome === 'completed' }), workerType: 'amend-kill' } },
    test: { requires: ['build'], task: { ...fastTask('test'), workerType: 'amend-kill' } },
    package: { requires: ['test'], task: { ...fastTask('package'), workerType: 'amend-kill' } },
    docs: { task: { ...fastTask('docs'), workerType: 'amend-kill' } },
  },
});
const graphState = async (id: string) => (await stack.root.request<{ status: { state: string } }>('scheduler', 'GET', `/task-graph/${id}/status`)).status.state;

test('scheduler workers killed before and right after the amend update: exactly one new run per changed label', async () => {
  const taskGraphId = slugid.nice();
  await stack.root.request('scheduler', 'PUT', `/task-graph/${taskGraphId}`, file('failed'));
  await eventually(async () => (await graphState(taskGraphId)) === 'blocked', 'blocked', 60_000);

  await kill(schedulerWorker);
  const amending = stack.root.request<{ workflow: string; tasks: { label: string; taskId: string }[] }>('scheduler', 'PUT', `/task-graph/${taskGraphId}/amend`, file('completed'));
  // committed in Postgres; the update waits for a worker
  await eventually(async () => (await stack.api.db.pool.query('SELECT 1 FROM graph_amends WHERE task_graph_id = $1', [taskGraphId])).rows.length === 1, 'amend committed', 30_000);
  schedulerWorker = spawnSchedulerWorker();
  const answer = await amending;
  assert.equal(answer.workflow, 'updated');
  // the worker that applied it dies at once, while the new nodes load and dispatch; another takes over
  await kill(schedulerWorker);
  schedulerWorker = spawnSchedulerWorker();
  await eventually(async () => (await graphState(taskGraphId)) === 'finished', 'finished', 120_000);

  const fresh = answer.tasks.map((t) => t.taskId);
  assert.deepEqual(answer.tasks.map((t) => t.label).sort(), ['build', 'package', 'test']);
  const { rows } = await stack.api.db.pool.query<{ task_id: string; runs: unknown[] }>('SELECT task_id, runs FROM tasks WHERE task_id = ANY($1::text[])', [fresh]);
  for (const row of rows) assert.equal(row.runs.length, 1, `one run of ${row.task_id}`);
  for (const id of fresh) assert.equal(claims.filter((c) => c === id).length, 1, `one claim of ${id}`);
  const { rows: members } = await stack.api.db.pool.query<{ label: string }>('SELECT label FROM graph_nodes WHERE task_graph_id = $1 AND member ORDER BY label', [taskGraphId]);
  assert.deepEqual(members.map((m) => m.label), ['build', 'docs', 'package', 'test'], 'one member per label');
  const { rows: all } = await stack.api.db.pool.query<{ n: number }>('SELECT count(*)::int AS n FROM graph_nodes WHERE task_graph_id = $1', [taskGraphId]);
  assert.equal(all[0].n, 7, 'four original nodes and three replacements, nothing twice');
});
