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
  const unpinned = bindings.filter((b) => !pinsProtectedWord(b));
  if (unpinned.length > 0) throw new TgsError('InputError', `${unpinnedReason(unpinned)}\n${HOW_TO_PIN}`);
}

/*
 * A hook acts with its role's scopes on the message that fired it, so a binding must take only messages that someone
 * the hook's author can vouch for made: a word of the routing key only a scope's holder can choose ("pinned").
 * - `route.<r>` CC keys: a task's or graph's route needs `queue:route:<r>` of its submitter. A pattern whose first
 *   word is `route` is matched against the CC keys alone and pins when its second word is a literal.
 * - Any other pattern is matched against the primary routing key alone, and pins when, before any `#`, it has a
 *   literal at a position only a scope grants: on the queue's task exchanges and `task-stalled` (`<taskId>.<runId>.
 *   <workerGroup>.<workerId>.<provisionerId>.<workerType>.<schedulerId>.<taskGroupId>.<routing>`) the provisionerId
 *   (`queue:create-task:…:<provisionerId>/<workerType>`), workerType, and schedulerId (`queue:scheduler-id:`)
 *   words; on `task-group-resolved` (`_._._._._._.<schedulerId>.<taskGroupId>._`) the schedulerId.
 * - The scheduler exchanges' primary key pins nothing: every graph's schedulerId is the deployment's own, and its id
 *   and `routing` are the submitter's free choice (the review's attack: a low-trust graph routed `nightly` firing a
 *   release hook bound to `#.nightly`). Bind a graph route there.
 * Matching each kind of pattern against one kind of key keeps `*.*.*.*.p.w.#` from matching a CC key
 * `route.a.b.c.p.w` that whoever holds any route scope could make.
 */
const LITERAL = (w: string | undefined) => w !== undefined && w !== '*' && w !== '#';
const ROUTE_WORD = 'route';

/** The positions of an exchange's primary routing key only a scope's holder chooses (above). */
function protectedPositions(exchange: string): number[] {
  if (exchange.endsWith('queue/v1/task-group-resolved')) return [6];
  if (/queue\/v1\/[a-z-]+$/.test(exchange) || exchange.endsWith('tgs/v1/task-stalled')) return [4, 5, 6];
  return [];
}

const isRoutePattern = (pattern: string) => pattern.split('.')[0] === ROUTE_WORD;

/** Does the binding take only messages with a word a scope's holder chose (above)? */
export function pinsProtectedWord(b: Binding): boolean {
  const words = b.routingKeyPattern.split('.');
  if (words[0] === ROUTE_WORD) return LITERAL(words[1]);
  const positions = protectedPositions(b.exchange);
  for (let i = 0; i < words.length && words[i] !== '#'; i++) if (positions.includes(i) && LITERAL(words[i])) return true;
  return false;
}

export function unpinnedReason(unpinned: Binding[]): string {
  return (
    `These bindings take messages any task or graph submitter can make (no word of them needs a scope), and the hook would act with its role's scopes on them: ${JSON.stringify(unpinned)}`
  );
}

export const HOW_TO_PIN =
  'Bind a route instead: give the graphs (or tasks) the hook should follow `routes: ["<route>"]` (their submitters need `queue:route:<route>`) and bind `route.<route>` ' +
  '(e.g. `route.project.release.nightly`); on the queue\'s task exchanges a literal provisionerId, workerType or schedulerId word also pins ' +
  '(`*.*.*.*.<provisionerId>.<workerType>.#`). docs/formats.md § Hooks.';

/** A binding as one string (a set's key). */
export const bindingKey = (b: Binding) => JSON.stringify([b.exchange, b.routingKeyPattern]);

/**
 * Does one of the bindings take a message of `exchange` routed by `routingKey` and CC'd to `cc`? Only pinned bindings
 * count (a hook stored before the rule fires on none of its unpinned ones); a `route.` pattern is matched against the
 * CC keys, any other against the primary key (above).
 */
export function bindingsMatch(bindings: Binding[], exchange: string, routingKey: string, cc: string[]): boolean {
  return bindings.some(
    (b) =>
      b.exchange === exchange &&
      pinsProtectedWord(b) &&
      (isRoutePattern(b.routingKeyPattern) ? cc.some((k) => topicMatches(b.routingKeyPattern, k)) : topicMatches(b.routingKeyPattern, routingKey)),
  );
}


