-- Amend (docs/formats.md § Amend): each member node keeps what its definition in the graph file digested to, so an
-- amended file is classified label by label without the old file. `digest` is sha256 of the node's canonical JSON
-- (the version-2 graph hash's part), `work_digest` the same without the task's metadata-only fields (created,
-- deadline, expires, priority, routes, tags, metadata): equal work digests and different digests make a
-- metadata-only change. 64 bytes a node. NULL for nodes stored before this migration: an amend reruns them.
ALTER TABLE graph_nodes ADD COLUMN digest bytea, ADD COLUMN work_digest bytea;
-- A node an amend replaced (the idx of its replacement) or removed (-1): no longer a member, kept for the history.
ALTER TABLE graph_nodes ADD COLUMN superseded_by integer;
