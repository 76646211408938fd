-- Cached graph nodes (src/taskCache, docs/formats.md § Cached tasks): one row a graph node that carries `cache`.
-- The entries themselves are the index's (indexed_tasks at `tgs.cache.<tier>.<name>.<key>`); this row keeps what
-- the key was made of, so `why` can show it and compare two tasks, and what its lookup found.
CREATE TABLE task_cache (
  task_id       text PRIMARY KEY,
  task_graph_id text NOT NULL REFERENCES task_graphs ON DELETE CASCADE,
  label         text NOT NULL,
  name          text NOT NULL,
  tier          text NOT NULL,
  -- hex sha256 of the versioned canonical inputs (src/taskCache/key.ts)
  key           text NOT NULL,
  -- the inputs the key was made of: name, digestData, taskQueueId, payload (dependencies' taskIds replaced by
  -- their keys), sorted scopes, the sorted keys of the requires
  inputs        jsonb NOT NULL,
  -- use: look up when ready, write on a miss; refresh: run and overwrite; off: neither
  mode          text NOT NULL CHECK (mode IN ('use', 'refresh', 'off')),
  max_age_s     integer,
  -- the latest deadline of this task and its dependents: a source must not expire before it
  needed_until  timestamptz NOT NULL,
  -- what the lookup found, set in the transaction that scheduled the task or resolved it from the cache:
  -- [{tier, result, taskId?}] with result hit | miss | expired | source-failed | expires-before-deadline
  lookup        jsonb,
  looked_up     timestamptz,
  cached_from   jsonb
);
CREATE INDEX task_cache_graph ON task_cache (task_graph_id);
CREATE INDEX task_cache_key ON task_cache (name, key);
