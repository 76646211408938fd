import type pg from 'pg';
import type { Config } from '../config.js';
import type { Queryable } from '../db/pool.js';
import { artifactExpiresBefore } from '../queue/artifacts.js';
import { latestRuns } from '../queue/latestRuns.js';
import { resolveFromEarlierRuns } from '../queue/resolveFromEarlierRuns.js';
import { outputDifferences, runOutputs } from '../queue/runOutputs.js';
import { resolveTaskGroupsIfDone } from '../queue/taskGroups.js';

/**
 * Early cutoff (docs/formats.md § Early cutoff): a dependent an amend replaced only because something it requires was
 * replaced, whose replaced task had completed, is kept instead of run when every replaced requirement's new run
 * produced the same outputs as the run it replaces (src/queue/runOutputs.ts): its new task is resolved `completed` from
 * the replaced task's run, with no claim. The decision is made once, in the dispatch's transaction, when the dependent
 * is ready, and recorded on its node for `graph why`, inspect and the UI.
 */

/** One requirement the amend replaced: its label and its old and new taskIds. */
export interface CutoffInput {
  label: string;
  old: string;
  new: string;
}

/** What the dispatch decided. */
export interface CutoffOutcome {
  kept: boolean;
  /** for people: "kept: build's outputs unchanged", "rerun: build's outputs changed (dist/app.js)" */
  reason: string;
  at: string;
  /** the run the kept task reuses */
  keptFrom?: { taskId: string; runId: number };
}

/** graph_nodes.cutoff (migration 040). */
export interface CutoffSpec {
  /** the replaced task */
  from: string;
  inputs: CutoffInput[];
  outcome?: CutoffOutcome;
}

/** Names listed in a reason, at most. */
const LISTED_NAMES = 5;

/**
 * The latest deadline among the task and the tasks that require it (the kept run's artifacts must outlive them), and
 * when the task whose run would be kept expires: one statement.
 */
async function keepWindow(db: Queryable, taskId: string, from: string): Promise<{ until: Date; fromExpires: Date | null }> {
  const { rows } = await db.query<{ until: Date; from_expires: Date | null }>(
    `SELECT max(deadline) AS until, (SELECT expires FROM tasks WHERE task_id = $2) AS from_expires FROM tasks
      WHERE task_id = $1 OR task_id IN (SELECT dependent_task_id FROM task_dependencies WHERE required_task_id = $1)`,
    [taskId, from],
  );
  return { until: rows[0].until, fromExpires: rows[0].from_expires };
}

const listed = (names: string[]) => names.slice(0, LISTED_NAMES).join(', ') + (names.length > LISTED_NAMES ? `, and ${names.length - LISTED_NAMES} more` : '');

/** Whether the dependent is kept, and why: every input compared, the first difference decides. */
async function decide(db: Queryable, taskId: string, spec: CutoffSpec, now: Date): Promise<CutoffOutcome> {
  const at = now.toISOString();
  const runs = new Map((await latestRuns(db, [spec.from, ...spec.inputs.flatMap((i) => [i.old, i.new])])).map((r) => [r.task_id, r]));
  const from = runs.get(spec.from);
  if (!from || from.state !== 'completed') return { kept: false, reason: `rerun: the task it replaces (${spec.from}) has no completed run`, at };
  const { until, fromExpires } = await keepWindow(db, taskId, spec.from);
  if ((fromExpires !== null && fromExpires < until) || (await artifactExpiresBefore(db, spec.from, from.run_id, until))) {
    return { kept: false, reason: `rerun: the run it would keep (${spec.from} run ${from.run_id}) has artifacts that expire before ${until.toISOString()}`, at };
  }
  for (const input of spec.inputs) {
    const before = runs.get(input.old);
    const after = runs.get(input.new);
    if (!before || before.state !== 'completed') return { kept: false, reason: `rerun: ${input.label}'s replaced task has no completed run to compare with`, at };
    if (!after || after.state !== 'completed') return { kept: false, reason: `rerun: ${input.label} did not complete`, at };
    const differences = outputDifferences(await runOutputs(db, input.old, before.run_id), await runOutputs(db, input.new, after.run_id));
    if (differences.length > 0) return { kept: false, reason: `rerun: ${input.label}'s outputs changed (${listed(differences)})`, at };
  }
  const labels = spec.inputs.map((i) => i.label);
  const whose = labels.length === 1 ? `${labels[0]}'s outputs` : `the outputs of ${listed(labels.slice(0, -1))} and ${labels[labels.length - 1]}`;
  return { kept: true, reason: `kept: ${whose} unchanged`, at, keptFrom: { taskId: spec.from, runId: from.run_id } };
}

/**
 * The cutoff's part of scheduling ready tasks, in the dispatch's transaction (src/activities/index.ts), after the
 * cache's (`fromCache`: the ready tasks the cache resolved, whose cutoff is recorded as such): each other ready member
 * with an undecided cutoff is decided; the kept are resolved from the runs they keep, and every decision is recorded,
 * in the same transaction, so a scheduler worker killed in between leaves nothing and the retried dispatch decides
 * again. Returns the taskIds resolved (the rest are scheduled).
 */
export async function resolveReadyByCutoff(
  client: pg.PoolClient,
  config: Config,
  taskGraphId: string,
  ready: string[],
  fromCache: ReadonlySet<string>,
  now: Date,
): Promise<Set<string>> {
  // the ready tasks locked in taskId order first, as the cache and every bulk change lock them (no deadlock with a cancel)
  await client.query('SELECT 1 FROM tasks WHERE task_id = ANY($1::text[]) ORDER BY task_id FOR UPDATE', [ready]);
  const { rows } = await client.query<{ idx: number; task_id: string; cutoff: CutoffSpec }>(
    `SELECT idx, task_id, cutoff FROM graph_nodes
      WHERE task_graph_id = $1 AND task_id = ANY($2::text[]) AND member AND cutoff IS NOT NULL AND NOT cutoff ? 'outcome'`,
    [taskGraphId, ready],
  );
  if (rows.length === 0) return new Set();
  const outcomes = new Map<string, { idx: number; outcome: CutoffOutcome }>();
  for (const row of rows) {
    const outcome = fromCache.has(row.task_id)
      ? { kept: false, reason: 'reused from the cache instead', at: now.toISOString() }
      : await decide(client, row.task_id, row.cutoff, now);
    outcomes.set(row.task_id, { idx: row.idx, outcome });
  }
  const kept = [...outcomes].flatMap(([taskId, { outcome }]) => (outcome.keptFrom ? [{ taskId, keptFrom: outcome.keptFrom }] : []));
  const resolved = new Set((await resolveFromEarlierRuns(client, config, kept, now)).map((r) => r.task_id));
  for (const [taskId, entry] of outcomes) {
    // kept, but the queue did not take it (a cancel or the deadline came first)
    if (entry.outcome.kept && !resolved.has(taskId)) entry.outcome = { kept: false, reason: 'rerun: the task was no longer unscheduled when it could be kept', at: entry.outcome.at };
  }
  await client.query(
    `UPDATE graph_nodes n SET cutoff = n.cutoff || jsonb_build_object('outcome', v.outcome)
       FROM jsonb_to_recordset($2::jsonb) AS v(idx int, outcome jsonb) WHERE n.task_graph_id = $1 AND n.idx = v.idx`,
    [taskGraphId, JSON.stringify([...outcomes.values()])],
  );
  if (resolved.size > 0) await resolveTaskGroupsIfDone(client, config, [taskGraphId]);
  return resolved;
}
