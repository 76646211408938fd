-- Who submitted a graph: the clientId of the createTaskGraph call (`hook-id:<group>/<id>` for a hook's fire), '' when
-- unknown (graphs started natively through Temporal, queue-level groups, graphs stored before this migration). The
-- UI's "mine" lists a signed-in client's graphs by it; metadata.owner is free text any submitter writes.
ALTER TABLE task_graphs ADD COLUMN submitted_by text NOT NULL DEFAULT '';
