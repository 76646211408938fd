import type pg from 'pg';
import type { Config } from '../config.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import { TgsError } from '../errors.js';
import type { ScopeExpression } from '../auth/scopes.js';
import { compile, describeErrors, jsonProblems } from '../api/validate.js';
import { cancelTasks } from '../queue/cancelTasks.js';
import { createTaskScopes } from '../queue/createTaskScopes.js';
import { priorityRank } from '../queue/createTasks.js';
import type { TaskDefinition } from '../queue/definition.js';
import { GraphIntake, type LabelledTask } from './graphIntake.js';
import { graphTaskIds } from './graphTaskIds.js';
import { graphNodeSchema, LABEL_PATTERN, type GraphNodeInput } from './graphSchema.js';
import { describeGraphErrors, prepareNode, substitute, type GraphErrors } from './prepareGraph.js';
import { getGraph, setNodeCounts, type GraphRow } from './graphStore.js';
import { nodeDigests } from './nodeDigests.js';
import { cutoffCandidates, planAmend, summarize, type AmendPlan, type CutoffCandidate, type IncomingNode, type StoredNode } from './amendPlan.js';
import type { CutoffSpec } from './earlyCutoff.js';

const LABEL = new RegExp(LABEL_PATTERN);
/** An amend's body is held whole (it is classified before anything is written): the graph body limit bounds it. */
const FIVE_DAYS = 5 * 24 * 3600_000;

export interface AmendResult {
  graph: GraphRow;
  /** the graph's state before the amend (a finished graph's workflow is started again) */
  stateBefore: GraphRow['state'];
  summary: ReturnType<typeof summarize>;
  /** the new tasks, by label */
  tasks: LabelledTask[];
  /** every node any amend of the graph superseded (the `amend` update's list) */
  superseded: number[];
  dryRun: boolean;
  seq?: number;
  /** dependents whose completed run is kept if what they require comes out byte-identical (the early cutoff) */
  mayBeKept: string[];
}

/** The body's nodes, validated (defaults filled, as the intake fills them); problems by label. */
function readNodes(body: unknown): Map<string, GraphNodeInput> {
  const tasks = (body as { tasks?: unknown } | null)?.tasks;
  if (tasks === null || typeof tasks !== 'object' || Array.isArray(tasks)) {
    throw new TgsError('InputValidationError', "Input does not match the schema:\nbody must have required property 'tasks', an object of nodes by label");
  }
  const errors: GraphErrors = new Map();
  const nodes = new Map<string, GraphNodeInput>();
  const validate = compile(graphNodeSchema);
  for (const [label, value] of Object.entries(tasks)) {
    if (!LABEL.test(label)) {
      errors.set(label.slice(0, 300), [`label must match ${LABEL_PATTERN}`]);
      continue;
    }
    const problems = jsonProblems(value, `tasks.${label}`);
    if (problems.length > 0 || !validate(value)) {
      errors.set(label, problems.length > 0 ? problems : describeErrors(validate.errors, `tasks.${label}`).split('\n'));
      continue;
    }
    nodes.set(label, value as GraphNodeInput);
  }
  if (nodes.size === 0 && errors.size === 0) throw new TgsError('InputValidationError', 'Input does not match the schema:\nbody.tasks must NOT have fewer than 1 properties');
  if (errors.size > 0) throw new TgsError('InputValidationError', describeGraphErrors(errors), { labels: [...errors.keys()].sort() });
  return nodes;
}

/** Every label a node requires or names in `$subs` must be in the file (kept nodes are checked here, new ones by the intake too). */
function refuseUnknownNames(incoming: IncomingNode[], nodes: Map<string, GraphNodeInput>): void {
  const errors: GraphErrors = new Map();
  for (const node of incoming) {
    const unknown = node.dependsOn.filter((name) => !nodes.has(name));
    if (unknown.length > 0) errors.set(node.label, unknown.map((name) => `requires unknown label ${JSON.stringify(name)}`));
  }
  if (errors.size > 0) throw new TgsError('InputValidationError', describeGraphErrors(errors), { labels: [...errors.keys()].sort() });
}

function incomingOf(label: string, node: GraphNodeInput): IncomingNode {
  const { digest, workDigest } = nodeDigests(node);
  const subs: string[] = [];
  substitute(node.task, (name) => {
    subs.push(name);
    return '';
  }, []);
  return { label, digest: digest.toString('hex'), workDigest: workDigest.toString('hex'), dependsOn: [...new Set([...node.requires, ...subs])] };
}

async function storedNodes(db: Queryable, taskGraphId: string): Promise<StoredNode[]> {
  const { rows } = await db.query<{ label: string; idx: number; task_id: string; digest: string | null; work_digest: string | null; state: string }>(
    `SELECT n.label, n.idx, n.task_id, encode(n.digest, 'hex') AS digest, encode(n.work_digest, 'hex') AS work_digest, t.state
       FROM graph_nodes n JOIN tasks t ON t.task_id = n.task_id
      WHERE n.task_graph_id = $1 AND n.member AND n.label IS NOT NULL`,
    [taskGraphId],
  );
  return rows.map((r) => ({ label: r.label, idx: r.idx, taskId: r.task_id, state: r.state, ...(r.digest ? { digest: r.digest } : {}), ...(r.work_digest ? { workDigest: r.work_digest } : {}) }));
}

/** The new definitions of the metadata-only labels, checked (scopes included) before anything is written. */
function preparePatches(
  config: Config,
  graph: GraphRow,
  plan: AmendPlan,
  nodes: Map<string, GraphNodeInput>,
  stored: Map<string, StoredNode & { definition: TaskDefinition }>,
  authorize: (expr: ScopeExpression) => void,
  now: Date,
): { taskId: string; definition: TaskDefinition }[] {
  const errors: GraphErrors = new Map();
  const patches: { taskId: string; definition: TaskDefinition }[] = [];
  for (const label of plan.patched) {
    const old = stored.get(label) as StoredNode & { definition: TaskDefinition };
    const prepared = prepareNode({
      config,
      taskGraphId: graph.task_graph_id,
      graphRouting: graph.routing,
      label,
      node: nodes.get(label) as GraphNodeInput,
      taskId: old.taskId,
      // a metadata-only label depends on kept labels only (a dependent of a replaced one is replaced itself)
      taskIdOf: (name) => stored.get(name)?.taskId ?? '',
      onSubs: () => undefined,
      now,
    });
    if ('errors' in prepared) {
      errors.set(label, prepared.errors);
      continue;
    }
    const definition = prepared.definition;
    if (Date.parse(definition.deadline) - Date.parse(old.definition.created) > FIVE_DAYS) {
      errors.set(label, [`task.deadline must be at most 5 days after the stored task's created (${old.definition.created}); a later deadline needs a new task`]);
      continue;
    }
    // a cached node's route to its entry is the graph's, not the file's: it stays
    const cacheRoutes = old.definition.routes.filter((r) => r.startsWith('index.tgs.cache.'));
    definition.routes = [...definition.routes.filter((r) => !cacheRoutes.includes(r)), ...cacheRoutes];
    authorize(createTaskScopes(definition));
    patches.push({ taskId: old.taskId, definition });
  }
  if (errors.size > 0) throw new TgsError('InputValidationError', describeGraphErrors(errors), { labels: [...errors.keys()].sort() });
  return patches;
}

async function patchMetadata(db: Queryable, patches: { taskId: string; definition: TaskDefinition }[]): Promise<void> {
  if (patches.length === 0) return;
  await db.query(
    `UPDATE tasks t SET priority = v.priority, priority_rank = v.priority_rank, deadline = v.deadline, expires = v.expires,
            definition = t.definition || jsonb_build_object('priority', v.priority, 'deadline', v.deadline_text, 'expires', v.expires_text,
                                                            'routes', v.routes, 'tags', v.tags, 'metadata', v.metadata)
       FROM jsonb_to_recordset($1::jsonb) AS v(task_id text, priority text, priority_rank smallint, deadline timestamptz, expires timestamptz,
                                             deadline_text text, expires_text text, routes jsonb, tags jsonb, metadata jsonb)
      WHERE t.task_id = v.task_id`,
    [
      JSON.stringify(
        patches.map(({ taskId, definition: d }) => ({
          task_id: taskId,
          priority: d.priority,
          priority_rank: priorityRank(d.priority),
          deadline: d.deadline,
          expires: d.expires,
          deadline_text: d.deadline,
          expires_text: d.expires,
          routes: d.routes,
          tags: d.tags,
          metadata: d.metadata,
        })),
      ),
    ],
  );
}

/**
 * Amend (docs/formats.md § Amend): the whole edited graph file, classified label by label against the stored nodes
 * (src/scheduler/amendPlan.ts). In one transaction under the graph row's lock: everything is checked first (the
 * nodes, requires and cycles of the result, and every scope the new and patched tasks need); then the replaced and
 * removed nodes stop being members (their unresolved tasks canceled), the replaced and added labels get new tasks,
 * metadata-only labels are patched, and the amend is recorded. A crash anywhere leaves nothing, and a repeated amend of
 * the same file finds every label unchanged, so each changed label gets exactly one new task. A finished graph is
 * marked running again (its workflow is started by the caller after the commit). `dryRun` classifies only.
 */
export async function amendTaskGraph(
  deps: { config: Config; pool: pg.Pool },
  taskGraphId: string,
  body: unknown,
  options: { authorize: (expr: ScopeExpression) => void; who: string; dryRun: boolean },
): Promise<AmendResult> {
  const { config } = deps;
  options.authorize(`scheduler:amend-task-graph:${taskGraphId}`);
  const nodes = readNodes(body);
  const incoming = [...nodes].map(([label, node]) => incomingOf(label, node));
  refuseUnknownNames(incoming, nodes);
  return withTransaction(deps.pool, async (client) => {
    const graph = await getGraph(client, taskGraphId, !options.dryRun);
    if (!graph) throw new TgsError('ResourceNotFound', `task-graph ${taskGraphId} not found`);
    if (graph.state === 'canceled') throw new TgsError('RequestConflict', `task-graph ${taskGraphId} is canceled; submit a new graph instead`);
    if (graph.origin === 'queue') throw new TgsError('RequestConflict', `task-graph ${taskGraphId} is a task group with queue-level dependencies: it has no graph file to amend`);
    const storedList = await storedNodes(client, taskGraphId);
    const plan = planAmend(storedList, incoming);
    const summary = summarize(plan);
    const candidates = cutoffCandidates(plan, storedList, incoming, (label) => nodes.get(label)?.requires ?? []);
    const mayBeKept = [...candidates.keys()].sort();
    const now = new Date();
    const replaced = new Set(plan.replaced);
    const kept = new Map<string, { taskId: string; idx: number }>();
    for (const n of storedList) if (!replaced.has(n.label) && !plan.removed.includes(n.label)) kept.set(n.label, { taskId: n.taskId, idx: n.idx });
    const definitions = await client.query<{ task_id: string; definition: TaskDefinition }>('SELECT task_id, definition FROM tasks WHERE task_id = ANY($1::text[])', [
      plan.patched.map((l) => (storedList.find((n) => n.label === l) as StoredNode).taskId),
    ]);
    const byTask = new Map(definitions.rows.map((r) => [r.task_id, r.definition]));
    const stored = new Map(storedList.map((n) => [n.label, { ...n, definition: byTask.get(n.taskId) as TaskDefinition }]));
    const patches = preparePatches(config, graph, plan, nodes, stored, options.authorize, now);

    const intake = new GraphIntake({ config, taskGraphId, routing: graph.routing, existing: kept, startIdx: graph.node_count, now, authorize: options.authorize });
    const newTaskId = graphTaskIds();
    for (const label of plan.replaced) intake.add(label, movedToNow(nodes.get(label) as GraphNodeInput, now), newTaskId);
    if (plan.replaced.length > 0) intake.finish(graph.scopes);
    // a dry run checks everything a real one would, then writes nothing
    if (options.dryRun) return { graph, stateBefore: graph.state, summary, tasks: [], superseded: await supersededIdx(client, taskGraphId), dryRun: true, mayBeKept };

    // checked: now the writes
    const outgoing = storedList.filter((n) => replaced.has(n.label) || plan.removed.includes(n.label));
    await client.query('UPDATE graph_nodes SET member = false, superseded_by = -1 WHERE task_graph_id = $1 AND idx = ANY($2::int[])', [taskGraphId, outgoing.map((n) => n.idx)]);
    await cancelTasks(client, config, outgoing.filter((n) => !['completed', 'failed', 'exception'].includes(n.state)).map((n) => n.taskId));
    if (plan.replaced.length > 0) {
      await intake.finishCache(client, 'use');
      await intake.flush(client);
      await client.query(
        `UPDATE graph_nodes o SET superseded_by = n.idx FROM graph_nodes n
          WHERE o.task_graph_id = $1 AND o.idx = ANY($2::int[]) AND n.task_graph_id = $1 AND n.member AND n.label = o.label`,
        [taskGraphId, outgoing.map((n) => n.idx)],
      );
    }
    await patchMetadata(client, patches);
    const tasks = [...intake.created()].flat();
    await markAmended(client, taskGraphId, plan, tasks, candidates);
    // a patched node's digest is now the file's, so the same file amended again finds it unchanged (its source too: GET .../file)
    const patchedDigests = plan.patched.map((label) => ({ idx: (stored.get(label) as StoredNode).idx, digest: (incoming.find((n) => n.label === label) as IncomingNode).digest, source: nodes.get(label) }));
    await client.query(
      `UPDATE graph_nodes n SET digest = decode(v.digest, 'hex'), source = v.source FROM jsonb_to_recordset($2::jsonb) AS v(idx int, digest text, source jsonb)
        WHERE n.task_graph_id = $1 AND n.idx = v.idx`,
      [taskGraphId, JSON.stringify(patchedDigests)],
    );
    const nodeCount = graph.node_count + intake.count;
    await setNodeCounts(client, taskGraphId, nodeCount, intake.count);
    const { rows: seqRows } = await client.query<{ seq: number }>(
      `INSERT INTO graph_amends (task_graph_id, seq, who, summary)
       SELECT $1, coalesce(max(seq), 0) + 1, $2, $3 FROM graph_amends WHERE task_graph_id = $1 RETURNING seq`,
      [taskGraphId, options.who.slice(0, 500), JSON.stringify(summary)],
    );
    const changes = plan.replaced.length + plan.removed.length;
    let row: GraphRow = { ...graph, node_count: nodeCount, task_count: graph.task_count + intake.count };
    if (graph.state === 'finished' && changes > 0) {
      // the new workflow run announces running itself, its messages numbered under the new count of resumes
      const { rows } = await client.query<GraphRow>(
        `UPDATE task_graphs SET state = 'running', state_reason = $2, resumes = resumes + 1, workflow_started = true, updated = now()
          WHERE task_graph_id = $1 RETURNING *`,
        [taskGraphId, `amended by ${options.who}`.slice(0, 2000)],
      );
      row = rows[0];
    }
    return { graph: row, stateBefore: graph.state, summary, tasks, superseded: await supersededIdx(client, taskGraphId), dryRun: false, seq: seqRows[0].seq, mayBeKept };
  });
}

/** How far from now a task's `created` may be (the queue's rule, src/queue/definition.ts). */
const CREATED_WINDOW_MS = 15 * 60 * 1000;

/**
 * A new task's times for a label of the file: as the file has them, unless its `created` is outside the window the
 * queue accepts (a file read back with GET .../file keeps the times of the tasks it describes): then `created` is now
 * and `deadline` and `expires` move by as much, so the task keeps the time it was given. Its digests stay the file's.
 */
function movedToNow(node: GraphNodeInput, now: Date): GraphNodeInput {
  const task = node.task as { created?: unknown; deadline?: unknown; expires?: unknown };
  const created = typeof task.created === 'string' ? Date.parse(task.created) : NaN;
  if (Number.isNaN(created) || Math.abs(now.getTime() - created) <= CREATED_WINDOW_MS) return node;
  const shift = (value: unknown) => (typeof value === 'string' && !Number.isNaN(Date.parse(value)) ? new Date(Date.parse(value) + now.getTime() - created).toISOString() : value);
  return { ...node, task: { ...task, created: now.toISOString(), deadline: shift(task.deadline), ...(task.expires !== undefined ? { expires: shift(task.expires) } : {}) } } as GraphNodeInput;
}

/** graph_nodes.amended (migration 040) for each class's code; `removed` and `unchanged` mark nothing. */
const AMENDED_CODE = { changed: 'c', added: 'a', dependent: 'd', metadata: 'm' } as const;

/**
 * Marks what this amend did to each node (the marks of the amend before are cleared) and gives each cutoff candidate
 * its spec, with its inputs' new taskIds (src/scheduler/earlyCutoff.ts decides it when it is ready).
 */
async function markAmended(
  db: Queryable,
  taskGraphId: string,
  plan: AmendPlan,
  tasks: { label: string; taskId: string }[],
  candidates: Map<string, CutoffCandidate>,
): Promise<void> {
  const newTaskId = new Map(tasks.map((t) => [t.label, t.taskId]));
  const marks: { label: string; code: string; cutoff: CutoffSpec | null }[] = [];
  for (const [label, c] of plan.classes) {
    if (!(c in AMENDED_CODE)) continue;
    const candidate = candidates.get(label);
    const cutoff = candidate ? { from: candidate.from, inputs: candidate.inputs.map((i) => ({ ...i, new: newTaskId.get(i.label) as string })) } : null;
    marks.push({ label, code: AMENDED_CODE[c as keyof typeof AMENDED_CODE], cutoff });
  }
  await db.query('UPDATE graph_nodes SET amended = NULL WHERE task_graph_id = $1 AND amended IS NOT NULL', [taskGraphId]);
  await db.query(
    // a patched node keeps its cutoff (an earlier amend's, decided or still waiting for its inputs)
    `UPDATE graph_nodes n SET amended = v.code::"char", cutoff = CASE WHEN v.code = 'm' THEN n.cutoff ELSE v.cutoff END
       FROM jsonb_to_recordset($2::jsonb) AS v(label text, code text, cutoff jsonb)
      WHERE n.task_graph_id = $1 AND n.member AND n.label = v.label`,
    [taskGraphId, JSON.stringify(marks)],
  );
}

async function supersededIdx(db: Queryable, taskGraphId: string): Promise<number[]> {
  const { rows } = await db.query<{ idx: number }>('SELECT idx FROM graph_nodes WHERE task_graph_id = $1 AND superseded_by IS NOT NULL ORDER BY idx', [taskGraphId]);
  return rows.map((r) => r.idx);
}
