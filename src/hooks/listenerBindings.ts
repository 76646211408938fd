import type pg from 'pg';
import type { Config } from '../config.js';
import { withTransaction, type Queryable } from '../db/pool.js';
import type { BusChannel } from '../exchanges/bus.js';
import { bindableExchanges, bindingKey, pinsProtectedWord } from './bindings.js';
import { listAllBindings, listHookBindings, type Binding } from './store.js';

/** The `hook_listener_bindings` table (migration 026) and the reconciliation of the listener queue's bindings with the hooks. */

/** Sent after a hook write commits (src/hooks/api/writeHook.ts): the listener reconciles its bindings at once. */
export const HOOK_BINDINGS_CHANNEL = 'tgs_hook_bindings';

/**
 * The hook listener's durable queue: one per deployment, named as the bridge's is (docs/deployments.md), so two
 * deployments on one vhost never take each other's messages and the listeners of one deployment share it.
 */
export function hookListenerQueueName(config: Pick<Config, 'exchangePrefix' | 'schedulerId'>): string {
  return `${config.exchangePrefix}tgs/hook-listener/${config.schedulerId}`;
}

async function recordedBindings(db: Queryable, queueName: string): Promise<Binding[]> {
  const { rows } = await db.query<{ exchange: string; routing_key_pattern: string }>(
    'SELECT exchange, routing_key_pattern FROM hook_listener_bindings WHERE queue_name = $1',
    [queueName],
  );
  return rows.map((r) => ({ exchange: r.exchange, routingKeyPattern: r.routing_key_pattern }));
}

/** What the queue is bound to now, as recorded (the tests read it to know a binding is in place). */
export const listenerBindings = recordedBindings;

export interface BindingChanges {
  bound: Binding[];
  unbound: Binding[];
  /** bindings of hooks to exchanges no longer bindable here (TGS_EXCHANGE_PREFIX changed since): not bound */
  skipped: Binding[];
  /**
   * bindings stored before the rule that a binding pins a protected word (src/hooks/bindings.ts), which no longer
   * validate: not bound, and never fired even when another hook's binding brings their message
   */
  unpinned: Binding[];
  /** the hooks (`<hookGroupId>/<hookId>`) with such bindings */
  unpinnedHooks: string[];
}

/**
 * Makes the queue's bindings the union of every hook's bindings: binds what is wanted and not recorded (every wanted
 * one when `all`, for a queue that may have lost its bindings: a new connection to the in-process bus, a queue an
 * operator deleted), unbinds what is recorded and no longer wanted, and records the result in the same transaction.
 * Both are idempotent on the broker: a commit that fails after an unbind leaves the row, and the next reconciliation
 * unbinds again; one that fails after a bind leaves a binding without its row, bound again while a hook wants it and
 * otherwise harmless (its messages match no hook and are acked). The listeners of a deployment reconcile one at a
 * time (an advisory lock on the queue's name), each against the hooks as committed when it holds the lock.
 */
export async function reconcileListenerBindings(
  pool: pg.Pool,
  ch: BusChannel,
  config: Pick<Config, 'exchangePrefix' | 'schedulerId'>,
  all: boolean,
): Promise<BindingChanges> {
  const queueName = hookListenerQueueName(config);
  return withTransaction(pool, async (db) => {
    await db.query('SELECT pg_advisory_xact_lock(hashtextextended($1, 0))', [`tgs/hook-listener/${queueName}`]);
    const bindable = bindableExchanges(config.exchangePrefix);
    const requested = await listAllBindings(db);
    const wanted = requested.filter((b) => bindable.has(b.exchange) && pinsProtectedWord(b));
    const skipped = requested.filter((b) => !bindable.has(b.exchange));
    const unpinned = requested.filter((b) => bindable.has(b.exchange) && !pinsProtectedWord(b));
    const recorded = await recordedBindings(db, queueName);
    const recordedKeys = new Set(recorded.map(bindingKey));
    const wantedKeys = new Set(wanted.map(bindingKey));
    const bound = wanted.filter((b) => all || !recordedKeys.has(bindingKey(b)));
    const unbound = recorded.filter((b) => !wantedKeys.has(bindingKey(b)));
    for (const b of bound) {
      // the relay declares the deployment's exchanges too; a listener started first must not fail on a missing one
      await ch.assertExchange(b.exchange, 'topic', { durable: true });
      await ch.bindQueue(queueName, b.exchange, b.routingKeyPattern);
      await db.query('INSERT INTO hook_listener_bindings (queue_name, exchange, routing_key_pattern) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING', [
        queueName,
        b.exchange,
        b.routingKeyPattern,
      ]);
    }
    for (const b of unbound) {
      await ch.unbindQueue(queueName, b.exchange, b.routingKeyPattern);
      await db.query('DELETE FROM hook_listener_bindings WHERE queue_name = $1 AND exchange = $2 AND routing_key_pattern = $3', [
        queueName,
        b.exchange,
        b.routingKeyPattern,
      ]);
    }
    const unpinnedHooks =
      unpinned.length === 0
        ? []
        : (await listHookBindings(db)).filter((h) => h.bindings.some((b) => bindable.has(b.exchange) && !pinsProtectedWord(b))).map((h) => `${h.hookGroupId}/${h.hookId}`);
    return { bound: all ? bound.filter((b) => !recordedKeys.has(bindingKey(b))) : bound, unbound, skipped, unpinned, unpinnedHooks };
  });
}
