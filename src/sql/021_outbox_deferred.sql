-- The deferred lane of the outbox: the task-defined messages of a graph's submit or extension, thousands written
-- by one transaction. In the outbox they went out in id order ahead of every message written after them, so a
-- 10,000-task graph's first resolution reached its workflow 222-358 ms after its report, behind its own graph's
-- 10,000 task-defined messages (a chain's hop takes ~8 ms from report to signal), and a 100,000-task submit held
-- every other graph's resolutions for seconds. The relay publishes this lane between the outbox's batches, and a
-- task's own later messages take its task-defined message out of the lane ahead of them (src/exchanges/relay.ts),
-- so each task's messages keep their order. `id` orders the lane itself; it is not an outbox id.
CREATE TABLE outbox_deferred (
  id         bigserial PRIMARY KEY,
  task_id    text NOT NULL,
  message_id text NOT NULL,
  payload    jsonb NOT NULL,
  render     text NOT NULL,
  created    timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX outbox_deferred_task ON outbox_deferred (task_id);
-- Written and emptied in bulk: vacuumed after a few thousand deletes, as the outbox is (migration 020).
ALTER TABLE outbox_deferred SET (autovacuum_vacuum_scale_factor = 0, autovacuum_vacuum_threshold = 5000);
