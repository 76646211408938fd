-- The deferred lane's task-defined messages are rendered by the relay from the task's row as it was defined
-- (src/queue/taskRow.ts taskAsDefinedSql) when it publishes them, so a graph's submit stores only the taskId and
-- the message id of each: a copy of each row cost a 20,000-task graph's submit a tenth of its Postgres CPU and of
-- its time. Rows written before keep their payload and are published from it.
ALTER TABLE outbox_deferred ALTER COLUMN payload DROP NOT NULL;
