-- The auth service's audit history (Taskcluster's audit_history, its db versions 0106 and 0111): a row for each
-- change the auth API makes to a client or a role, written in the same transaction as the change
-- (src/auth/audit.ts), and for each client the expiry sweep deletes. `client_id` is who made the change.
-- getEntityHistory reads an entity's rows, listAuditHistory a caller's, both in the order they were written
-- (keyset paging on `id`). Rows older than 30 days are purged by the sweeps (Taskcluster's default retention).
CREATE TABLE audit_history (
  id          bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
  entity_type text NOT NULL,
  entity_id   text NOT NULL,
  client_id   text NOT NULL,
  action_type text NOT NULL,
  created     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX audit_history_entity ON audit_history (entity_type, entity_id, id);
CREATE INDEX audit_history_client ON audit_history (client_id, id);
CREATE INDEX audit_history_created ON audit_history (created);
