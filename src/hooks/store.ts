import type { Queryable } from '../db/pool.js';

/** The `hooks` and `hook_last_fires` tables (migration 025): every query on them. */

export interface HookMetadata {
  name: string;
  description: string;
  owner: string;
  emailOnError?: boolean;
}

export interface Binding {
  exchange: string;
  routingKeyPattern: string;
}

/** A hook as Taskcluster's `hook-definition` shows it. */
export interface HookDefinition {
  hookGroupId: string;
  hookId: string;
  metadata: HookMetadata;
  task: Record<string, unknown>;
  bindings: Binding[];
  schedule: string[];
  triggerSchema: Record<string, unknown>;
}

/** How a hook's Temporal Schedule runs (tgs's extension): paused, its overlap policy, its catch-up window. */
export interface SchedulePolicy {
  paused: boolean;
  overlap: Overlap;
  catchupWindowSeconds: number;
}
export const OVERLAPS = ['SKIP', 'BUFFER_ONE', 'BUFFER_ALL', 'CANCEL_OTHER', 'TERMINATE_OTHER', 'ALLOW_ALL'] as const;
export type Overlap = (typeof OVERLAPS)[number];

export interface HookRow extends HookDefinition {
  /** as stored: sealed when TGS_HOOK_TOKEN_KEY is set (src/hooks/tokenCipher.ts) */
  triggerToken: string;
  policy: SchedulePolicy;
}

interface Row {
  hook_group_id: string;
  hook_id: string;
  metadata: HookMetadata;
  task: Record<string, unknown>;
  bindings: Binding[];
  schedule: string[];
  trigger_schema: Record<string, unknown>;
  trigger_token: string;
  paused: boolean;
  overlap: Overlap;
  catchup_window_s: number;
}

const COLUMNS = 'hook_group_id, hook_id, metadata, task, bindings, schedule, trigger_schema, trigger_token, paused, overlap, catchup_window_s';
const INSERTED = 'hook_group_id, hook_id, metadata, task, bindings, schedule, trigger_schema, trigger_token';

const fromRow = (r: Row): HookRow => ({
  hookGroupId: r.hook_group_id,
  hookId: r.hook_id,
  metadata: r.metadata,
  task: r.task,
  bindings: r.bindings,
  schedule: r.schedule,
  triggerSchema: r.trigger_schema,
  triggerToken: r.trigger_token,
  policy: { paused: r.paused, overlap: r.overlap, catchupWindowSeconds: r.catchup_window_s },
});

/** The definition alone: what the API answers (never the trigger token). */
export const definitionOf = ({ triggerToken: _token, policy: _policy, ...definition }: HookRow): HookDefinition => definition;

/** A hook, or undefined; `lock` takes a share lock for the caller's transaction (a fire against a concurrent remove). */
export async function getHook(db: Queryable, hookGroupId: string, hookId: string, lock = false): Promise<HookRow | undefined> {
  const { rows } = await db.query<Row>(
    `SELECT ${COLUMNS} FROM hooks WHERE hook_group_id = $1 AND hook_id = $2${lock ? ' FOR SHARE' : ''}`,
    [hookGroupId, hookId],
  );
  return rows[0] && fromRow(rows[0]);
}

export async function listHookGroups(db: Queryable): Promise<string[]> {
  const { rows } = await db.query<{ hook_group_id: string }>('SELECT DISTINCT hook_group_id FROM hooks ORDER BY hook_group_id');
  return rows.map((r) => r.hook_group_id);
}

export async function listHooks(db: Queryable, hookGroupId: string): Promise<HookRow[]> {
  const { rows } = await db.query<Row>(`SELECT ${COLUMNS} FROM hooks WHERE hook_group_id = $1 ORDER BY hook_id`, [hookGroupId]);
  return rows.map(fromRow);
}

/** Every hook with a schedule: what the Temporal Schedules are reconciled with. */
export async function listScheduledHooks(db: Queryable): Promise<HookRow[]> {
  const { rows } = await db.query<Row>(`SELECT ${COLUMNS} FROM hooks WHERE jsonb_array_length(schedule) > 0 ORDER BY hook_group_id, hook_id`);
  return rows.map(fromRow);
}

/** The hooks with a binding to `exchange`: the ones a message of it may fire (src/hooks/messageFire.ts). */
export async function listHooksBoundTo(db: Queryable, exchange: string): Promise<HookRow[]> {
  const { rows } = await db.query<Row>(
    `SELECT ${COLUMNS} FROM hooks WHERE bindings @> jsonb_build_array(jsonb_build_object('exchange', $1::text)) ORDER BY hook_group_id, hook_id`,
    [exchange],
  );
  return rows.map(fromRow);
}

/** The union of every hook's bindings: what the hook listener's queue is bound to. */
export async function listAllBindings(db: Queryable): Promise<Binding[]> {
  const { rows } = await db.query<{ exchange: string; routing_key_pattern: string }>(
    `SELECT DISTINCT b->>'exchange' AS exchange, b->>'routingKeyPattern' AS routing_key_pattern
       FROM hooks, jsonb_array_elements(bindings) b ORDER BY 1, 2`,
  );
  return rows.map((r) => ({ exchange: r.exchange, routingKeyPattern: r.routing_key_pattern }));
}

/** The hooks with bindings, each with its bindings (the listener names the hooks whose bindings it refuses). */
export async function listHookBindings(db: Queryable): Promise<{ hookGroupId: string; hookId: string; bindings: Binding[] }[]> {
  const { rows } = await db.query<{ hook_group_id: string; hook_id: string; bindings: Binding[] }>(
    "SELECT hook_group_id, hook_id, bindings FROM hooks WHERE bindings <> '[]'::jsonb ORDER BY 1, 2",
  );
  return rows.map((r) => ({ hookGroupId: r.hook_group_id, hookId: r.hook_id, bindings: r.bindings }));
}

/** Inserts a hook; false when one with these ids exists (nothing written). */
export async function insertHook(db: Queryable, hook: HookDefinition & { triggerToken: string }): Promise<boolean> {
  const { rowCount } = await db.query(
    `INSERT INTO hooks (${INSERTED}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8) ON CONFLICT DO NOTHING`,
    [hook.hookGroupId, hook.hookId, hook.metadata, hook.task, JSON.stringify(hook.bindings), JSON.stringify(hook.schedule), hook.triggerSchema, hook.triggerToken],
  );
  return rowCount === 1;
}

/** Replaces a hook's definition (its token stays); undefined when there is no such hook. */
export async function updateHookDefinition(db: Queryable, hook: HookDefinition): Promise<HookRow | undefined> {
  const { rows } = await db.query<Row>(
    `UPDATE hooks SET metadata = $3, task = $4, bindings = $5, schedule = $6, trigger_schema = $7, last_modified = now()
      WHERE hook_group_id = $1 AND hook_id = $2 RETURNING ${COLUMNS}`,
    [hook.hookGroupId, hook.hookId, hook.metadata, hook.task, JSON.stringify(hook.bindings), JSON.stringify(hook.schedule), hook.triggerSchema],
  );
  return rows[0] && fromRow(rows[0]);
}

/** Sets a new trigger token; false when there is no such hook. */
export async function setTriggerToken(db: Queryable, hookGroupId: string, hookId: string, token: string): Promise<boolean> {
  const { rowCount } = await db.query(
    'UPDATE hooks SET trigger_token = $3, last_modified = now() WHERE hook_group_id = $1 AND hook_id = $2',
    [hookGroupId, hookId, token],
  );
  return rowCount === 1;
}

/** Sets a hook's schedule policy; undefined when there is no such hook. */
export async function setSchedulePolicy(db: Queryable, hookGroupId: string, hookId: string, policy: SchedulePolicy): Promise<HookRow | undefined> {
  const { rows } = await db.query<Row>(
    `UPDATE hooks SET paused = $3, overlap = $4, catchup_window_s = $5, last_modified = now()
      WHERE hook_group_id = $1 AND hook_id = $2 RETURNING ${COLUMNS}`,
    [hookGroupId, hookId, policy.paused, policy.overlap, policy.catchupWindowSeconds],
  );
  return rows[0] && fromRow(rows[0]);
}

/** Deletes a hook and its last fires (cascade); false when there was none. */
export async function deleteHook(db: Queryable, hookGroupId: string, hookId: string): Promise<boolean> {
  const { rowCount } = await db.query('DELETE FROM hooks WHERE hook_group_id = $1 AND hook_id = $2', [hookGroupId, hookId]);
  return rowCount === 1;
}

export type FiredBy = 'schedule' | 'triggerHook' | 'triggerHookWithToken' | 'pulseMessage';

export interface LastFire {
  hookGroupId: string;
  hookId: string;
  taskId: string;
  firedBy: FiredBy;
  taskCreateTime: Date;
  result: 'success' | 'error';
  error: string;
}

/** Records a fire; a fire of the same taskId already recorded (a retried activity) is kept as it was. */
export async function recordLastFire(db: Queryable, fire: LastFire): Promise<void> {
  await db.query(
    `INSERT INTO hook_last_fires (hook_group_id, hook_id, task_id, fired_by, task_create_time, result, error)
     VALUES ($1, $2, $3, $4, $5, $6, $7) ON CONFLICT DO NOTHING`,
    [fire.hookGroupId, fire.hookId, fire.taskId, fire.firedBy, fire.taskCreateTime, fire.result, fire.error],
  );
}

/** The fire recorded for this taskId, if any. */
export async function getLastFire(db: Queryable, hookGroupId: string, hookId: string, taskId: string): Promise<Pick<LastFire, 'result' | 'error'> | undefined> {
  const { rows } = await db.query<{ result: 'success' | 'error'; error: string }>(
    'SELECT result, error FROM hook_last_fires WHERE hook_group_id = $1 AND hook_id = $2 AND task_id = $3',
    [hookGroupId, hookId, taskId],
  );
  return rows[0];
}

export interface LastFireWithState extends LastFire {
  /** the task's state now, `unknown` when there is no such task */
  taskState: string;
}

/** Fires newest first, each with its task's state; keyset-paged on (time, taskId). */
export async function listLastFires(
  db: Queryable,
  hookGroupId: string,
  hookId: string,
  page: { after?: { time: string; taskId: string }; limit: number },
): Promise<LastFireWithState[]> {
  const { rows } = await db.query<{
    task_id: string;
    fired_by: FiredBy;
    task_create_time: Date;
    result: 'success' | 'error';
    error: string;
    task_state: string | null;
  }>(
    `SELECT f.task_id, f.fired_by, f.task_create_time, f.result, f.error, t.state AS task_state
       FROM hook_last_fires f LEFT JOIN tasks t ON t.task_id = f.task_id
      WHERE f.hook_group_id = $1 AND f.hook_id = $2
        AND ($3::timestamptz IS NULL OR (f.task_create_time, f.task_id) < ($3::timestamptz, $4::text))
      ORDER BY f.task_create_time DESC, f.task_id DESC
      LIMIT $5`,
    [hookGroupId, hookId, page.after?.time ?? null, page.after?.taskId ?? null, page.limit],
  );
  return rows.map((r) => ({
    hookGroupId,
    hookId,
    taskId: r.task_id,
    firedBy: r.fired_by,
    taskCreateTime: r.task_create_time,
    result: r.result,
    error: r.error,
    taskState: r.task_state ?? 'unknown',
  }));
}
