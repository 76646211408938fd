import { TgsError } from '../errors.js';
import { queueExchangeName, schedulerExchanges, schedulerExchangeName, queueExchanges, tgsExchangeName } from '../exchanges/exchanges.js';
import { topicMatches } from '../exchanges/busMemory.js';
import type { Binding } from './store.js';

/**
 * Which exchanges a hook may bind to (docs/formats.md § Hooks). Taskcluster's hooks service refuses bindings to a
 * denylist of exchanges: task creation ("triggering a hook on task-created could create a task bomb") and its own
 * hooks exchanges (internal). tgs's equivalents: `queue/v1/task-defined` and `queue/v1/task-pending`, which every
 * task a hook creates publishes at once with no worker involved, so a hook bound to them with a matching pattern
 * would fire itself without end; and `tgs/v1/dependent-task-defined`, between tgs's processes. Beyond Taskcluster's
 * rule, a binding must name one of this deployment's exchanges (its TGS_EXCHANGE_PREFIX): nothing else is published
 * on the deployment's broker by tgs, and binding to an exchange that does not exist fails on RabbitMQ, so such a
 * binding could never fire.
 */
export function bindableExchanges(prefix: string): Set<string> {
  return new Set([
    ...queueExchanges.filter((e) => e !== 'task-defined' && e !== 'task-pending').map((e) => queueExchangeName(prefix, e)),
    ...schedulerExchanges.map((e) => schedulerExchangeName(prefix, e)),
    tgsExchangeName(prefix, 'task-stalled'),
  ]);
}

/** A routing-key pattern: words of anything but `.`, `*` and `#` standing alone (RabbitMQ's topic patterns). */
const PATTERN_WORD = /^(?:[^.*#]*|\*|#)$/;

/** Refuses (400, naming the offending bindings) bindings to an exchange a hook may not bind to, or a malformed pattern. */
export function checkBindings(prefix: string, bindings: Binding[]): void {
  const allowed = bindableExchanges(prefix);
  const denied = bindings.filter((b) => !allowed.has(b.exchange));
  if (denied.length > 0) {
    throw new TgsError(
      'InputError',
      `One or more of the exchanges below have been denied access to hooks\n${JSON.stringify(denied)}\n` +
        `A hook may bind to this deployment's exchanges except task-defined and task-pending (a hook they fire could fire itself without end): ${[...allowed].join(', ')}`,
    );
  }
  const malformed = bindings.filter((b) => !b.routingKeyPattern.split('.').every((w) => PATTERN_WORD.test(w)));
  if (malformed.length > 0) {
    throw new TgsError('InputError', `Invalid routingKeyPattern in ${JSON.stringify(malformed)}: words separated by \`.\`, each \`*\`, \`#\` or a word without them`);
  }
}

/** A binding as one string (a set's key). */
export const bindingKey = (b: Binding) => JSON.stringify([b.exchange, b.routingKeyPattern]);

/** Does one of the bindings take a message of `exchange` routed by any of `routingKeys` (its key and CC keys)? */
export function bindingsMatch(bindings: Binding[], exchange: string, routingKeys: string[]): boolean {
  return bindings.some((b) => b.exchange === exchange && routingKeys.some((k) => topicMatches(b.routingKeyPattern, k)));
}
