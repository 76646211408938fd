-- A graph's routes (docs/formats.md § Task-graph format): each a CC routing key `route.<route>` of the graph's
-- scheduler exchange messages, granted by the submitter's `queue:route:<route>` as a task's routes are. They are the
-- words of a graph's messages that a hook binding can trust (src/hooks/bindings.ts): a graph's `routing` and id need no
-- scope. Graphs stored before have none.
ALTER TABLE task_graphs ADD COLUMN routes text[] NOT NULL DEFAULT '{}';
