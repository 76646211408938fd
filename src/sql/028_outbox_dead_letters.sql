-- Messages the relay can never publish, set aside so the messages after them flow: a row of the outbox or of its
-- deferred lane whose message cannot be rendered (its snapshot fails the message schema), names an exchange the relay
-- does not declare, or has a routing key or message id longer than AMQP allows (src/exchanges/outboxMessage.ts
-- publishable). Before, such a row failed its whole batch at every try and held up every later message. The relay
-- moves a row here by the same statement that deletes it (src/exchanges/outboxStore.ts); the row's columns are kept
-- as they were, so a replay writes them back to the outbox (docs/operations.md § Dead-lettered messages).
CREATE TABLE outbox_dead_letters (
  id               bigserial PRIMARY KEY,
  -- 'outbox' or 'deferred': the table the row was in, and its id there
  lane             text NOT NULL CHECK (lane IN ('outbox', 'deferred')),
  source_id        bigint NOT NULL,
  message_id       text NOT NULL,
  exchange         text NOT NULL,
  routing_key      text NOT NULL,
  cc               text[] NOT NULL,
  payload          jsonb NOT NULL,
  render           text,
  -- the deferred lane's task (NULL for an outbox row)
  task_id          text,
  -- when the row was written to its lane, and when and why the relay set it aside
  created          timestamptz NOT NULL,
  reason           text NOT NULL,
  dead_lettered_at timestamptz NOT NULL DEFAULT now()
);
