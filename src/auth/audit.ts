import type { Queryable } from '../db/pool.js';

/**
 * The audit history (migration 031): who changed which client or role, and how. A row is written by the same
 * transaction as the change it records (the auth API's handlers, src/authService/api/), so a change that fails
 * leaves none and one that commits always has its row.
 */

/** Taskcluster's action names (services/auth/src/api.js AUDIT_ENTRY_TYPE). */
export const AUDIT_ACTION = {
  created: 'created',
  updated: 'updated',
  deleted: 'deleted',
  enabled: 'client enabled',
  disabled: 'client disabled',
  accessTokenReset: 'access token reset',
  expired: 'expired',
} as const;

export type AuditAction = (typeof AUDIT_ACTION)[keyof typeof AUDIT_ACTION];

/** Taskcluster's entity types (getEntityHistory's `entityType`); tgs writes rows for clients and roles. */
export const AUDIT_ENTITY_TYPE = /^(client|role|secret|hook|worker-pool)$/;

/** Who made a change: the caller's clientId, or Taskcluster's name for a request without credentials. */
export const auditClientId = (clientId: string | undefined) => clientId ?? 'auth-failed:no-auth';

/** Who the expiry sweep's deletions are recorded as (Taskcluster: `static/taskcluster/auth`). */
export const SWEEP_CLIENT_ID = 'static/tgs/auth';

/** Taskcluster's default retention of audit rows. */
export const AUDIT_RETENTION_DAYS = 30;

/** An audit row as getEntityHistory and listAuditHistory answer it. */
export interface AuditEntry {
  clientId: string;
  actionType: string;
  created: string;
  entityId: string;
  entityType: string;
}

export async function recordAudit(db: Queryable, entry: { entityType: 'client' | 'role'; entityId: string; clientId: string; action: AuditAction }): Promise<void> {
  await db.query('INSERT INTO audit_history (entity_type, entity_id, client_id, action_type) VALUES ($1, $2, $3, $4)', [
    entry.entityType,
    entry.entityId,
    entry.clientId,
    entry.action,
  ]);
}

interface AuditRow {
  id: string;
  entity_type: string;
  entity_id: string;
  client_id: string;
  action_type: string;
  created: Date;
}

const toEntry = (row: AuditRow): AuditEntry & { id: string } => ({
  id: row.id,
  clientId: row.client_id,
  actionType: row.action_type,
  created: row.created.toISOString(),
  entityId: row.entity_id,
  entityType: row.entity_type,
});

/**
 * One page of audit rows in the order they were written, after the row `after` (an id, 0 for the first page): an
 * entity's (`entity`) or a caller's (`clientId`). Each reads an index of its own (audit_history_entity, _client).
 */
export async function listAudit(
  db: Queryable,
  where: { entity: { type: string; id: string } } | { clientId: string },
  after: string,
  limit: number,
): Promise<Array<AuditEntry & { id: string }>> {
  const columns = 'id::text, entity_type, entity_id, client_id, action_type, created';
  const { rows } =
    'entity' in where
      ? await db.query<AuditRow>(
          `SELECT ${columns} FROM audit_history WHERE entity_type = $1 AND entity_id = $2 AND id > $3 ORDER BY id LIMIT $4`,
          [where.entity.type, where.entity.id, after, limit],
        )
      : await db.query<AuditRow>(`SELECT ${columns} FROM audit_history WHERE client_id = $1 AND id > $2 ORDER BY id LIMIT $3`, [
          where.clientId,
          after,
          limit,
        ]);
  return rows.map(toEntry);
}

const PURGE_BATCH = 500;

/** Deletes up to 500 audit rows older than the retention (the sweeps run it); how many it deleted. */
export async function purgeAuditHistory(db: Queryable, retentionDays = AUDIT_RETENTION_DAYS): Promise<number> {
  const { rowCount } = await db.query(
    `DELETE FROM audit_history WHERE id IN
       (SELECT id FROM audit_history WHERE created < now() - make_interval(days => $1) ORDER BY created LIMIT ${PURGE_BATCH})`,
    [retentionDays],
  );
  return rowCount ?? 0;
}
