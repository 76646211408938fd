-- The graph's current file (GET /api/scheduler/v1/task-graph/<id>/file, docs/formats.md § Amend): each member node keeps
-- its node as submitted, validated and with the schema's defaults filled (`requires`, `reruns`, `task` before `$subs`
-- were replaced and with its deadline as given, `cache`), written by the INSERT that stores the node (submit, extend, an
-- amend's new nodes) and replaced by an amend's metadata-only patch. The task definitions cannot give it back: their
-- `$subs` are taskIds and their dependencies come from `requires`. NULL for nodes stored before this migration and for
-- the members of a task group with queue-level dependencies (they have no graph file): the file lists them as `missing`.
ALTER TABLE graph_nodes ADD COLUMN source jsonb;
