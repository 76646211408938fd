-- Pending tasks announced as stalled (src/queue/stalls.ts): one row a task while its run waits on a queue with no
-- workers past TGS_STALL_AFTER_MS, so `task-stalled` goes out once per run and blocker, not once a sweep. The row
-- goes when the run is no longer pending or its queue has workers again; a later stall is announced anew.
CREATE TABLE task_stalls (
  task_id       text PRIMARY KEY,
  run_id        integer NOT NULL,
  task_queue_id text NOT NULL,
  kind          text NOT NULL,
  announced     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX task_stalls_queue ON task_stalls (task_queue_id);
