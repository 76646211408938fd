-- Taskcluster's Hooks service (docs/formats.md § Hooks): a hook is a task template (JSON-e) fired on a schedule,
-- by an authorized call, or by anyone holding its trigger token. Its schedule runs as a Temporal Schedule (one per
-- hook, src/hooks/schedules.ts); Postgres is the truth the schedules are reconciled with.
CREATE TABLE hooks (
  hook_group_id  text NOT NULL,
  hook_id        text NOT NULL,
  metadata       jsonb NOT NULL,
  task           jsonb NOT NULL,
  bindings       jsonb NOT NULL DEFAULT '[]',
  schedule       jsonb NOT NULL DEFAULT '[]',
  trigger_schema jsonb NOT NULL,
  -- a bearer secret for triggerHookWithToken; getTriggerToken hands it back, so it is kept, not hashed
  trigger_token  text NOT NULL,
  -- tgs's extensions (docs/formats.md § Hooks): the schedule paused, its overlap policy and catch-up window
  paused         boolean NOT NULL DEFAULT false,
  overlap        text NOT NULL DEFAULT 'ALLOW_ALL'
                 CHECK (overlap IN ('SKIP', 'BUFFER_ONE', 'BUFFER_ALL', 'CANCEL_OTHER', 'TERMINATE_OTHER', 'ALLOW_ALL')),
  catchup_window_s integer NOT NULL DEFAULT 86400 CHECK (catchup_window_s >= 10),
  created        timestamptz NOT NULL DEFAULT now(),
  last_modified  timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (hook_group_id, hook_id)
);

-- What each fire did. One row per created (or refused) taskId: a scheduled fire's taskId is derived from its
-- action time, so an activity retried after a worker restart finds its row and adds none.
CREATE TABLE hook_last_fires (
  hook_group_id    text NOT NULL,
  hook_id          text NOT NULL,
  task_id          text NOT NULL,
  fired_by         text NOT NULL,
  task_create_time timestamptz NOT NULL,
  result           text NOT NULL CHECK (result IN ('success', 'error')),
  error            text NOT NULL DEFAULT '',
  PRIMARY KEY (hook_group_id, hook_id, task_id),
  FOREIGN KEY (hook_group_id, hook_id) REFERENCES hooks ON DELETE CASCADE
);
CREATE INDEX hook_last_fires_by_time ON hook_last_fires (hook_group_id, hook_id, task_create_time DESC, task_id);
