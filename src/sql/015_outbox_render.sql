-- Outbox rows the relay renders: a single-statement claim writes the claimed row's snapshot here instead of
-- the finished message, so the Taskcluster message shape stays in one place (src/queue/messages.ts) while the
-- claim needs no transaction of its own (one round trip instead of five; see src/queue/claimWork.ts).
-- render NULL: exchange, routing_key, cc and payload are the message. render = '<exchange>' (e.g.
-- 'task-running'): payload is {"row": <task row snapshot>, "runId": n} and the relay builds the message.
ALTER TABLE outbox ADD COLUMN render text;
