-- Early cutoff (docs/formats.md § Early cutoff). Each uploaded artifact keeps the sha256 of its bytes, computed as
-- they stream in (NULL for a reference or error artifact, for one not uploaded, and for bytes stored before this
-- migration: such an artifact never compares equal).
ALTER TABLE artifacts ADD COLUMN sha256 bytea;
-- What the last amend that touched a member node did to it: 'c' changed, 'a' added, 'd' dependent (replaced because
-- something it reads was), 'm' metadata patched in place; NULL untouched.
ALTER TABLE graph_nodes ADD COLUMN amended "char";
-- A dependent whose replaced node had completed: {from: <the replaced taskId>, inputs: [{label, old, new}]} (the labels
-- it requires that the amend replaced, with their old and new taskIds). When it is ready, the dispatch compares each
-- input's new outputs with its old ones and records {outcome: {kept, reason, ...}} here: kept, it is resolved from the
-- replaced task's run without a claim.
ALTER TABLE graph_nodes ADD COLUMN cutoff jsonb;
-- The node a new node replaced, found from the new one (inspect's `replaces`).
CREATE INDEX graph_nodes_superseded ON graph_nodes (task_graph_id, superseded_by) WHERE superseded_by IS NOT NULL;
