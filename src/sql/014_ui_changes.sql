-- Live changes for the graph explorer (GET /api/scheduler/v1/task-graph/<id>/changes?since=<cursor>).
--
-- A task whose state changes is stamped with the id of the transaction that changed it (xid8). A reader's
-- cursor is its snapshot (pg_current_snapshot()); the rows that changed after cursor S are exactly those
-- whose change_xid is not visible in S. Unlike a sequence number, this stays exact when transactions commit
-- out of order (a sequence value taken by a transaction that commits late would fall behind a cursor that
-- already moved past it), and it needs no shared state between API processes.
--
-- Cost on the queue's hot path: a BEFORE UPDATE trigger that only runs when `state` changes (the WHEN
-- clause is evaluated without entering PL/pgSQL otherwise) and one more index entry per state change
-- (state changes are never HOT updates anyway: `state` is in the predicates of the partial indexes).
-- Rows that never changed state keep NULL and stay out of the index; their state is read with the graph.

CREATE FUNCTION tgs_stamp_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  NEW.change_xid := pg_current_xact_id();
  RETURN NEW;
END
$$;

ALTER TABLE tasks ADD COLUMN change_xid xid8;
CREATE INDEX tasks_group_change ON tasks (task_group_id, change_xid) WHERE change_xid IS NOT NULL;
CREATE TRIGGER tasks_stamp_change BEFORE UPDATE OF state ON tasks
  FOR EACH ROW WHEN (OLD.state IS DISTINCT FROM NEW.state) EXECUTE FUNCTION tgs_stamp_change();

-- The graph row (state, blocked_by, node_count on extend) is stamped on every update; few rows, rare updates.
ALTER TABLE task_graphs ADD COLUMN change_xid xid8;
ALTER TABLE task_graphs ALTER COLUMN change_xid SET DEFAULT pg_current_xact_id();
CREATE TRIGGER task_graphs_stamp_change BEFORE UPDATE ON task_graphs
  FOR EACH ROW EXECUTE FUNCTION tgs_stamp_change();

-- External nodes (tasks of other groups a graph's tasks depend on) are not in the graph's task group: the
-- changes query finds them through this index instead of scanning every node of the graph.
CREATE INDEX graph_nodes_external ON graph_nodes (task_graph_id) WHERE NOT member;
