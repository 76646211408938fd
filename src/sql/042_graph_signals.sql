-- The graph-signal lane (src/relay/graphSignalLane.ts): the relay's read of the outbox records, in the same statement,
-- one row per resolution message and graph that hears it (the graphs with the task as a node, live or of origin
-- `queue`), checked against the task's stored latest run; its signal loop sends each graph its `resolutions` signal and
-- deletes the rows Temporal accepted (or whose workflow has ended). What is left when a relay dies is signalled by the
-- next active relay. A row is the resolution as the task's row stored it, not as any message said it.
CREATE TABLE graph_signals (
  task_graph_id text NOT NULL,
  -- the outbox row's message_id: a row read again (a batch published again) is recorded once
  message_id    text NOT NULL,
  -- the graph's origin: a `queue` graph's workflow is started by its signal if it is not running
  origin        text NOT NULL,
  -- {taskId, runId, state, reasonResolved?}: src/workflows/contract.ts Resolution
  resolution    jsonb NOT NULL,
  created       timestamptz NOT NULL DEFAULT now(),
  PRIMARY KEY (task_graph_id, message_id)
);
