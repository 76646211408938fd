-- The auth API (/api/auth/v1): what Taskcluster's client records carry beyond 001's columns.
ALTER TABLE clients
  ADD COLUMN delete_on_expiration boolean NOT NULL DEFAULT false,
  ADD COLUMN last_modified timestamptz NOT NULL DEFAULT now(),
  ADD COLUMN last_rotated timestamptz NOT NULL DEFAULT now();

-- deleteExpiredClients looks only at clients that asked to be deleted once expired.
CREATE INDEX clients_delete_on_expiration ON clients (expires) WHERE delete_on_expiration;
