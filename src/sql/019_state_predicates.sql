-- The queue's hot statements find pending and unresolved tasks through partial indexes. With the predicates
-- written as `state = 'pending'` and `state IN (...)`, the planner estimated how many rows match from the
-- table's statistics, and those describe the moment autovacuum last analyzed the table: analyzed while nothing
-- was pending (a drained queue), they said one row, and every statement planned after that (a named statement
-- keeps its plan) scanned whichever partial index looked smallest and sorted or filtered it. Measured on a
-- 15,000-task table analyzed drained, then 5,000 tasks pending: a claim read and sorted all 5,000 (8 ms, was
-- 0.3 ms); the task-group-resolved check joined every unresolved task against every group it was given (42 ms a
-- call), its backstop sweep 1.8 s a call.
--
-- The same tests as functions the planner cannot see into: it estimates a third of the rows for an opaque
-- boolean function whatever the statistics say, so the plans that walk one index in order (claim) or probe one
-- index per group (the checks) stay the cheap ones. An index predicate is used only where the query states the
-- same function, so the claim and the checks state these, and nothing else can pick the indexes up by accident.
-- PL/pgSQL, so that the planner cannot inline them back into the comparisons; ~1 µs a call.
CREATE FUNCTION tgs_task_pending(state text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ BEGIN RETURN state = 'pending'; END $$;
CREATE FUNCTION tgs_task_unresolved(state text) RETURNS boolean LANGUAGE plpgsql IMMUTABLE STRICT PARALLEL SAFE
  AS $$ BEGIN RETURN state IN ('unscheduled', 'pending', 'running'); END $$;

DROP INDEX tasks_pending;
CREATE INDEX tasks_pending ON tasks (provisioner_id, worker_type, priority_rank DESC, pending_since, task_id)
  WHERE tgs_task_pending(state);
DROP INDEX tasks_deadline;
CREATE INDEX tasks_deadline ON tasks (deadline) WHERE tgs_task_unresolved(state);
DROP INDEX tasks_group_unresolved;
CREATE INDEX tasks_group_unresolved ON tasks (task_group_id) WHERE tgs_task_unresolved(state);
