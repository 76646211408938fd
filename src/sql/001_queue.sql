-- The queue: tasks, their runs, dependencies, groups, artifacts, clients and the message outbox.

CREATE TABLE task_groups (
  task_group_id text PRIMARY KEY,
  scheduler_id  text NOT NULL,
  expires       timestamptz NOT NULL,
  sealed        timestamptz,
  -- set when a task-group-resolved message was written for the current set of tasks
  resolved_at   timestamptz
);

CREATE TABLE tasks (
  task_id        text PRIMARY KEY,
  task_group_id  text NOT NULL,
  scheduler_id   text NOT NULL,
  provisioner_id text NOT NULL,
  worker_type    text NOT NULL,
  priority       text NOT NULL,
  -- higher is claimed first: highest=7 ... lowest/normal=1
  priority_rank  smallint NOT NULL,
  requires       text NOT NULL,
  retries        integer NOT NULL,
  retries_left   integer NOT NULL,
  created        timestamptz NOT NULL,
  deadline       timestamptz NOT NULL,
  expires        timestamptz NOT NULL,
  -- the definition as stored (defaults filled in); returned verbatim by GET /task/<taskId>
  definition     jsonb NOT NULL,
  -- the state of the latest run, or 'unscheduled' while there is none
  state          text NOT NULL DEFAULT 'unscheduled'
                 CHECK (state IN ('unscheduled','pending','running','completed','failed','exception')),
  -- Taskcluster's runs array: [{runId, state, reasonCreated, reasonResolved, workerGroup, workerId,
  -- takenUntil, scheduled, started, resolved}]
  runs           jsonb NOT NULL DEFAULT '[]',
  taken_until    timestamptz,
  -- FIFO order within a priority: when the latest run became pending
  pending_since  timestamptz
);

-- claimWork: highest priority first, FIFO within a priority, per worker pool
CREATE INDEX tasks_pending ON tasks (provisioner_id, worker_type, priority_rank DESC, pending_since, task_id)
  WHERE state = 'pending';
CREATE INDEX tasks_claim_expiry ON tasks (taken_until) WHERE state = 'running';
CREATE INDEX tasks_deadline ON tasks (deadline) WHERE state IN ('unscheduled', 'pending', 'running');
CREATE INDEX tasks_expires ON tasks (expires);
CREATE INDEX tasks_group ON tasks (task_group_id, task_id);
CREATE INDEX tasks_group_unresolved ON tasks (task_group_id) WHERE state IN ('unscheduled', 'pending', 'running');

CREATE TABLE task_dependencies (
  required_task_id  text NOT NULL,
  dependent_task_id text NOT NULL,
  PRIMARY KEY (required_task_id, dependent_task_id)
);
CREATE INDEX task_dependencies_dependent ON task_dependencies (dependent_task_id);

CREATE TABLE artifacts (
  task_id      text NOT NULL,
  run_id       integer NOT NULL,
  name         text NOT NULL,
  storage_type text NOT NULL CHECK (storage_type IN ('s3', 'reference', 'error')),
  content_type text NOT NULL,
  expires      timestamptz NOT NULL,
  -- reference: {url}; error: {reason, message}; s3: {contentLength?}
  details      jsonb NOT NULL DEFAULT '{}',
  -- s3 artifacts are present once their bytes were uploaded
  present      boolean NOT NULL DEFAULT false,
  created      timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_id, run_id, name)
);
CREATE INDEX artifacts_expires ON artifacts (expires);

-- Uploaded bytes of s3-style artifacts, kept apart so listing artifacts never reads them.
CREATE TABLE artifact_data (
  task_id text NOT NULL,
  run_id  integer NOT NULL,
  name    text NOT NULL,
  data    bytea NOT NULL,
  PRIMARY KEY (task_id, run_id, name),
  FOREIGN KEY (task_id, run_id, name) REFERENCES artifacts ON DELETE CASCADE
);

CREATE TABLE clients (
  client_id    text PRIMARY KEY,
  access_token text NOT NULL,
  scopes       text[] NOT NULL DEFAULT '{}',
  description  text NOT NULL DEFAULT '',
  expires      timestamptz NOT NULL,
  created      timestamptz NOT NULL DEFAULT now(),
  last_date_used timestamptz
);

-- Transactional outbox: every state change writes its messages here in the same transaction;
-- the relay publishes them in id order on a confirm channel and deletes them once confirmed.
CREATE TABLE outbox (
  id          bigserial PRIMARY KEY,
  message_id  text NOT NULL,
  exchange    text NOT NULL,
  routing_key text NOT NULL,
  cc          text[] NOT NULL DEFAULT '{}',
  payload     jsonb NOT NULL,
  created     timestamptz NOT NULL DEFAULT now()
);
