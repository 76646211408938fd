-- graph_nodes had two indexes on its taskIds: graph_nodes_task (task_graph_id, task_id), unique, and
-- graph_nodes_by_task (task_id), which every lookup by taskId uses (the statements keep the graph id from choosing
-- their plan: src/scheduler/graphStore.ts). One unique index on (task_id, task_graph_id) does the work of both, and a
-- graph's submit writes one index entry a node fewer. Reads of a graph's nodes by the graph go through the primary
-- key (task_graph_id, idx).
DROP INDEX graph_nodes_task;
DROP INDEX graph_nodes_by_task;
CREATE UNIQUE INDEX graph_nodes_by_task ON graph_nodes (task_id, task_graph_id);
