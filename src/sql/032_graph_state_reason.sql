-- Why a graph is in its state, when someone ended it: who canceled it (through the scheduler API's cancel, the
-- workflow's `cancel` signal, or a Temporal cancellation of its workflow: docs/temporal.md § What Temporal's own
-- operations do to a graph). `tgs graph why`, the info endpoint and the UI show it; NULL for the states the graph's
-- own tasks lead to (running, blocked, finished).
ALTER TABLE task_graphs ADD COLUMN state_reason text;
