-- Graphs whose workflow never started, and graphs that outlive their tasks.
--
-- workflow_started: false from the commit of PUT /task-graph until the workflow's first graph event (or the
-- API's sweep starting it) sets it. A graph committed while Temporal was down, or whose API died between the
-- commit and the start, is found by the sweep (src/scheduler/missingWorkflows.ts) through the partial index.
-- Existing running graphs start out false: the sweep asks Temporal once for each (an idempotent start that
-- answers "already started" for every graph that has its workflow) and the stuck ones get theirs.
ALTER TABLE task_graphs ADD COLUMN workflow_started boolean NOT NULL DEFAULT false;
UPDATE task_graphs SET workflow_started = true WHERE origin = 'queue' OR state IN ('finished', 'canceled');
CREATE INDEX task_graphs_unstarted ON task_graphs (created) WHERE NOT workflow_started;

-- A graph's tasks are its task group (taskGroupId = taskGraphId), so the graph expires with the group: the
-- expiry sweep deletes it (graph_nodes cascade) when it deletes the group. Graphs whose group went before
-- this migration go now.
DELETE FROM task_graphs g WHERE NOT EXISTS (SELECT 1 FROM task_groups t WHERE t.task_group_id = g.task_graph_id);
