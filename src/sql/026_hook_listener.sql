-- The hook listener (src/hooks/listener.ts): a durable queue per deployment bound to the union of every hook's
-- `bindings`. RabbitMQ cannot list a queue's bindings over AMQP, so what the listener has bound is kept here: a
-- reconciliation binds what a hook asks for and is not here, and unbinds what is here and no hook asks for any more.
CREATE TABLE hook_listener_bindings (
  queue_name          text NOT NULL,
  exchange            text NOT NULL,
  routing_key_pattern text NOT NULL,
  PRIMARY KEY (queue_name, exchange, routing_key_pattern)
);

