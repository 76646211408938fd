-- Taskcluster's index service (src/indexService, docs/formats.md § The index): named pointers to tasks.
-- An entry `a.b.c` is stored as namespace `a.b`, name `c`; the namespaces above every entry are kept in
-- index_namespaces (parent `a`, name `b`; parent '' is the root) so listNamespaces reads one parent's children.

CREATE TABLE indexed_tasks (
  namespace text NOT NULL,
  name      text NOT NULL,
  -- Taskcluster's rank is a JSON number: an entry is replaced by one of higher or equal rank, never lower
  rank      double precision NOT NULL,
  task_id   text NOT NULL,
  data      jsonb NOT NULL,
  expires   timestamptz NOT NULL,
  PRIMARY KEY (namespace, name)
);
CREATE INDEX indexed_tasks_expires ON indexed_tasks (expires);

CREATE TABLE index_namespaces (
  parent  text NOT NULL,
  name    text NOT NULL,
  -- the latest expiry of an entry under it, rounded up to the next midnight (as Taskcluster, so most inserts
  -- leave the row alone)
  expires timestamptz NOT NULL,
  PRIMARY KEY (parent, name)
);
CREATE INDEX index_namespaces_expires ON index_namespaces (expires);

-- `task.extra.index.expires` as the index reads it when a task completes (src/indexService/completions.ts): an
-- ISO 8601 date-time, else NULL (the task is then not indexed). A cast that fails inside the relay's statement
-- would fail the whole batch again and again, so the failure is caught here.
CREATE FUNCTION tgs_index_expires(value jsonb) RETURNS timestamptz LANGUAGE plpgsql STABLE AS $$
BEGIN
  IF jsonb_typeof(value) <> 'string' OR value #>> '{}' !~ '^[0-9]{4}-[0-9]{2}-[0-9]{2}T[0-9]{2}:[0-9]{2}' THEN
    RETURN NULL;
  END IF;
  RETURN (value #>> '{}')::timestamptz;
EXCEPTION WHEN others THEN
  RETURN NULL;
END $$;

-- Taskcluster's index reads are public; in tgs reads are scopes every request holds through the `anonymous` role
-- (migration 016). A deployment that removed the role keeps it removed.
UPDATE roles
   SET scopes = ARRAY(SELECT DISTINCT unnest(scopes || ARRAY['index:find-task:*', 'index:list-namespaces:*', 'index:list-tasks:*']) ORDER BY 1),
       last_modified = now()
 WHERE role_id = 'anonymous';
UPDATE roles_generation SET generation = generation + 1;
