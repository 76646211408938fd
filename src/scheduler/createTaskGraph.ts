import type pg from 'pg';
import type { Config } from '../config.js';
import { withTransaction } from '../db/pool.js';
import { TgsError } from '../errors.js';
import { validateInput } from '../api/validate.js';
import type { ScopeExpression } from '../auth/scopes.js';
import { graphEnvelopeSchema } from './graphSchema.js';
import { GraphIntake, readGraphBody, type LabelledTask } from './graphIntake.js';
import { graphHash } from '../canonicalJson.js';
import { graphTaskIds } from './graphTaskIds.js';
import { bodyMembers, type GraphBody } from './bodyMembers.js';
import { getGraph, setNodeCounts, type GraphRow } from './graphStore.js';
import type { CacheMode } from '../taskCache/spec.js';

export interface CreatedGraph {
  graph: GraphRow;
  /** the graph's labels and taskIds in idx order, a page at a time, made or read only as the answer is written */
  tasks: Iterable<LabelledTask[]> | AsyncIterable<LabelledTask[]>;
}

export interface GraphEnvelope {
  routing: string;
  routes: string[];
  scopes: string[];
  metadata: Record<string, string>;
  tags: Record<string, string>;
  cacheMode: CacheMode;
}

/** A stored graph's members, read 5,000 at a time in idx order once the answer asks for them. */
async function* storedTasks(pool: pg.Pool, taskGraphId: string): AsyncGenerator<LabelledTask[]> {
  for (let from = 0; ; ) {
    const { rows } = await pool.query<{ label: string; task_id: string; idx: number }>(
      'SELECT label, task_id, idx FROM graph_nodes WHERE task_graph_id = $1 AND member AND idx >= $2 ORDER BY idx LIMIT 5000',
      [taskGraphId, from],
    );
    if (rows.length === 0) return;
    yield rows.map((r) => ({ label: r.label, taskId: r.task_id }));
    from = rows[rows.length - 1].idx + 1;
  }
}

const conflict = (taskGraphId: string) => new TgsError('RequestConflict', `task-graph ${taskGraphId} already exists with a different definition`);

/**
 * Validates a task-graph (docs/formats.md) and stores it with all its tasks in one transaction: the graph row, its
 * nodes and every task (unscheduled: the workflow schedules the roots). The body may be a stream of members
 * (the API's: src/api/jsonObjectStream.ts): its nodes are validated and written in chunks as they arrive, so no
 * process holds a large graph whole; anything refused rolls the whole transaction back. Idempotent: the same
 * graph again returns what was stored; a different graph under the same id is a conflict. `authorize` receives
 * each scope expression the caller needs before the tasks that need it are written.
 */
export async function createTaskGraph(
  deps: { config: Config; pool: pg.Pool },
  taskGraphId: string,
  body: GraphBody,
  options: {
    authorize?: (expr: ScopeExpression) => void;
    now?: Date;
    /** run in the creating transaction once a new graph is written (a hook records its fire there: src/hooks/fire.ts) */
    whenCreated?: (client: pg.PoolClient) => Promise<void>;
    /** the caller's clientId, stored as the graph's `submitted_by` (migration 039) */
    submittedBy?: string;
  } = {},
): Promise<CreatedGraph & { created: boolean }> {
  const { config, pool } = deps;
  // Before any work on the body: a caller who may not create graphs at all learns it at once.
  options.authorize?.('scheduler:create-task-graph');
  const members = bodyMembers(body);
  try {
    return await withTransaction(pool, async (client) => {
      // Two PUTs of one id meet here: the second reads the body only once the first has committed or rolled back.
      await client.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`task-graph/${taskGraphId}`]);
      const already = await getGraph(client, taskGraphId);
      if (!already) {
        // A graph owns its task group: it may not take over a group someone's createTask calls made already.
        const group = await client.query('SELECT 1 FROM task_groups WHERE task_group_id = $1', [taskGraphId]);
        if ((group.rowCount ?? 0) > 0) {
          throw new TgsError('RequestConflict', `task group ${taskGraphId} exists already: a task-graph's id must name a new task group`);
        }
      }
      const intake = new GraphIntake({
        config,
        taskGraphId,
        startIdx: 0,
        now: options.now ?? new Date(),
        authorize: options.authorize,
        keepNodes: already !== undefined && !already.graph_hash?.startsWith('v2:'),
      });
      let rowWritten = false;
      const writeChunk = async () => {
        if (already) {
          // comparing with the stored graph: only the digests are needed, not the prepared tasks
          intake.dropPending();
          return;
        }
        if (!rowWritten) {
          // the envelope may come after the tasks: the row is completed once the body is read
          await client.query("INSERT INTO task_graphs (task_graph_id, scheduler_id, graph_hash) VALUES ($1, $2, '')", [taskGraphId, config.schedulerId]);
          rowWritten = true;
        }
        await intake.flush(client);
      };
      const check = (partial: Record<string, unknown>) => validateInput(graphEnvelopeSchema, { ...partial });
      const { envelope: raw, tasksSeen } = await readGraphBody(members, intake, graphTaskIds(), writeChunk, check);
      const envelope = validateInput<GraphEnvelope>(graphEnvelopeSchema, raw);
      if (!tasksSeen) throw new TgsError('InputValidationError', "Input does not match the schema:\nbody must have required property 'tasks'");
      intake.finish(envelope.scopes);
      // graphs stored before `cacheMode` and `routes` existed were hashed without them: their defaults must not change
      // their hash
      const { cacheMode, routes, ...rest } = envelope;
      const hashed = { ...rest, ...(cacheMode === 'use' ? {} : { cacheMode }), ...(routes.length === 0 ? {} : { routes }) };
      // a route is a CC key of the graph's messages, which hooks trust as the submitter's word: Taskcluster's scope
      options.authorize?.({ AllOf: ['scheduler:create-task-graph', ...envelope.scopes, ...routes.map((r) => `queue:route:${r}`)] });
      if (already) {
        const hash = intake.keptNodes ? graphHash({ ...hashed, tasks: intake.keptNodes }) : intake.graphHash({ ...hashed });
        if (already.graph_hash !== hash) throw conflict(taskGraphId);
        return { graph: already, tasks: storedTasks(pool, taskGraphId), created: false };
      }
      await intake.finishCache(client, cacheMode);
      await writeChunk();
      if (intake.routingAssumed && envelope.routing !== '') {
        // The body's routing came after its tasks, which were written with none (`_.<task routing>`).
        await client.query(
          `UPDATE tasks SET definition = jsonb_set(definition, '{routing}', to_jsonb($2::text || substr(definition->>'routing', 2)))
           WHERE task_group_id = $1`,
          [taskGraphId, envelope.routing],
        );
      }
      const { rows } = await client.query<GraphRow>(
        `UPDATE task_graphs SET routing = $2, graph_hash = $3, scopes = $4, metadata = $5, tags = $6, routes = $7, submitted_by = $8, updated = now()
         WHERE task_graph_id = $1 RETURNING *`,
        [taskGraphId, envelope.routing, intake.graphHash({ ...hashed }), envelope.scopes, envelope.metadata, envelope.tags, routes, options.submittedBy ?? ''],
      );
      await setNodeCounts(client, taskGraphId, intake.count, intake.count);
      await options.whenCreated?.(client);
      return { graph: { ...rows[0], node_count: intake.count, task_count: intake.count }, tasks: intake.created(), created: true };
    });
  } catch (err) {
    // A graph row written without this lock (a task group using queue-level dependencies) took the id first.
    if ((err as { code?: string }).code === '23505') {
      const row = await getGraph(pool, taskGraphId);
      if (row) throw conflict(taskGraphId);
    }
    throw err;
  }
}
