-- Auth roles (src/auth/roleStore.ts) and the queue's worker metadata: provisioners, task queues (worker
-- types) and workers (src/queue/workers.ts).

CREATE TABLE roles (
  role_id       text PRIMARY KEY,
  scopes        text[] NOT NULL,
  description   text NOT NULL,
  created       timestamptz NOT NULL DEFAULT now(),
  last_modified timestamptz NOT NULL DEFAULT now()
);

-- Bumped in the same transaction as every role change; each API process caches the roles with the
-- generation it loaded (src/auth/roleStore.ts). The row is also the lock that serializes role changes, so
-- the cycle check always sees every other role.
CREATE TABLE roles_generation (
  one        boolean PRIMARY KEY DEFAULT true CHECK (one),
  generation bigint NOT NULL
);
INSERT INTO roles_generation VALUES (true, 1);

-- Every client, authenticated or not, holds `assume:anonymous` (as in Taskcluster). These are the reads tgs
-- served without credentials before its read endpoints carried Taskcluster's scopes; a deployment that
-- wants them private updates or deletes this role.
INSERT INTO roles (role_id, scopes, description) VALUES ('anonymous', ARRAY[
  'queue:get-task:*', 'queue:status:*', 'queue:list-task-group:*', 'queue:list-dependent-tasks:*',
  'queue:list-artifacts:*', 'queue:pending-count:*', 'queue:list-task-queues', 'queue:get-task-queue:*',
  'queue:list-provisioners', 'queue:get-provisioner:*', 'queue:list-worker-types:*', 'queue:get-worker-type:*'
], 'Scopes of every request, with or without credentials.');

-- Taskcluster's enableClient / disableClient: a disabled client cannot authenticate (nor issue credentials).
ALTER TABLE clients ADD COLUMN disabled boolean NOT NULL DEFAULT false;

CREATE TABLE provisioners (
  provisioner_id   text PRIMARY KEY,
  description      text NOT NULL DEFAULT '',
  stability        text NOT NULL DEFAULT 'experimental',
  actions          jsonb NOT NULL DEFAULT '[]',
  expires          timestamptz NOT NULL,
  last_date_active timestamptz NOT NULL
);

-- A task queue is `<provisionerId>/<workerType>`; old clients see it as a worker type.
CREATE TABLE task_queues (
  task_queue_id    text PRIMARY KEY,
  provisioner_id   text NOT NULL,
  worker_type      text NOT NULL,
  description      text NOT NULL DEFAULT '',
  stability        text NOT NULL DEFAULT 'experimental',
  expires          timestamptz NOT NULL,
  last_date_active timestamptz NOT NULL
);
CREATE INDEX task_queues_provisioner ON task_queues (provisioner_id, worker_type);

CREATE TABLE workers (
  task_queue_id      text NOT NULL,
  worker_group       text NOT NULL,
  worker_id          text NOT NULL,
  first_claim        timestamptz NOT NULL,
  last_date_active   timestamptz NOT NULL,
  expires            timestamptz NOT NULL,
  quarantine_until   timestamptz,
  -- Taskcluster's quarantineDetails: [{clientId, updatedAt, quarantineUntil, quarantineInfo}]
  quarantine_details jsonb NOT NULL DEFAULT '[]',
  -- the latest claimed runs, oldest first, at most 20: [{taskId, runId}]
  recent_tasks       jsonb NOT NULL DEFAULT '[]',
  PRIMARY KEY (task_queue_id, worker_group, worker_id)
);
