-- The task-graph scheduler: graphs and their nodes. Task definitions stay in `tasks` (the queue);
-- the workflow `task-graph/<taskGraphId>` holds the mutable graph state and reloads this structure.

CREATE TABLE task_graphs (
  task_graph_id text PRIMARY KEY,
  scheduler_id  text NOT NULL,
  routing       text NOT NULL DEFAULT '',
  -- running | blocked | finished | canceled; written with the scheduler exchange message that announces it
  state         text NOT NULL DEFAULT 'running' CHECK (state IN ('running', 'blocked', 'finished', 'canceled')),
  -- 'graph' when submitted as a task-graph, 'queue' when created by queue-level dependencies
  origin        text NOT NULL DEFAULT 'graph' CHECK (origin IN ('graph', 'queue')),
  -- sha256 of the canonical submitted graph: the same PUT again is a no-op, a different one a conflict
  graph_hash    text,
  scopes        text[] NOT NULL DEFAULT '{}',
  metadata      jsonb NOT NULL DEFAULT '{}',
  tags          jsonb NOT NULL DEFAULT '{}',
  -- number of graph_nodes rows; node idx values are 0 .. node_count-1
  node_count    integer NOT NULL DEFAULT 0,
  task_count    integer NOT NULL DEFAULT 0,
  blocked_by    text[] NOT NULL DEFAULT '{}',
  created       timestamptz NOT NULL DEFAULT now(),
  updated       timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX task_graphs_created ON task_graphs (created DESC, task_graph_id);
CREATE INDEX task_graphs_state ON task_graphs (state, created DESC);

-- One row per node of a graph's workflow state. Members are the graph's own tasks; externals are tasks
-- of other groups that members depend on (queue-level dependencies), tracked but never scheduled.
CREATE TABLE graph_nodes (
  task_graph_id text NOT NULL REFERENCES task_graphs ON DELETE CASCADE,
  idx           integer NOT NULL,
  task_id       text NOT NULL,
  member        boolean NOT NULL,
  -- the graph label (members of submitted graphs); taskId for queue-joined members; NULL for externals
  label         text,
  -- idx of each required node
  requires      integer[] NOT NULL DEFAULT '{}',
  -- 0 = all-completed, 1 = all-resolved
  requires_mode smallint NOT NULL DEFAULT 0,
  reruns        integer NOT NULL DEFAULT 0,
  -- decremented in the same transaction as the queue rerun it pays for, so a workflow that restarts from
  -- Postgres never reruns twice for one failure
  reruns_left   integer NOT NULL DEFAULT 0,
  -- set by a manual rerun with resetDependents: this resolved task must run again once its requires are met
  reset         boolean NOT NULL DEFAULT false,
  PRIMARY KEY (task_graph_id, idx)
);
CREATE UNIQUE INDEX graph_nodes_label ON graph_nodes (task_graph_id, label) WHERE member;
CREATE UNIQUE INDEX graph_nodes_task ON graph_nodes (task_graph_id, task_id);
CREATE INDEX graph_nodes_by_task ON graph_nodes (task_id);
