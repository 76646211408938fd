-- `terminated`: the graph's workflow closed before the graph ended (terminated, timed out, failed, or cancelled by a
-- workflow that did not end the graph). The API's sweep of closed workflows (src/scheduler/closedWorkflows.ts) marks
-- such a graph so, with why in state_reason; its tasks are left as they are, and `tgs graph resume` (POST
-- .../resume) starts the workflow again. `resumes` counts those starts: the scheduler exchange messages of a resumed
-- graph's workflow are numbered under it, so they never repeat the ids of the messages sent before
-- (docs/temporal.md § What Temporal's own operations do to a graph).
ALTER TABLE task_graphs DROP CONSTRAINT task_graphs_state_check;
ALTER TABLE task_graphs ADD CONSTRAINT task_graphs_state_check CHECK (state IN ('running', 'blocked', 'finished', 'canceled', 'terminated'));
ALTER TABLE task_graphs ADD COLUMN resumes int NOT NULL DEFAULT 0;
