import { TgsError } from '../errors.js';
import { expressionSatisfied, formatExpression, unsatisfiedPart, type ScopeExpression } from './scopes.js';

/**
 * Throws 403 InsufficientScopes when `have` does not satisfy `expr`, naming its smallest unsatisfied part (and
 * `required` in the details). A caller without credentials (`clientId` undefined) holds the `anonymous` role and is
 * refused the same way, as Taskcluster refuses it (libraries/api's auth middleware: 401 AuthenticationFailed only for
 * credentials that do not authenticate). The one scope refusal of tgs: the HTTP API's checks and the
 * Temporal-native graph start use it.
 */
export function requireScopes(clientId: string | undefined, have: readonly string[], expr: ScopeExpression): void {
  if (expressionSatisfied(have, expr)) return;
  const missing = unsatisfiedPart(have, expr) ?? expr;
  throw new TgsError(
    'InsufficientScopes',
    clientId === undefined
      ? `This request has no credentials (the anonymous role) and needs credentials with scopes: ${formatExpression(missing)}`
      : `Client ${clientId} lacks scopes: ${formatExpression(missing)}`,
    { required: missing },
  );
}
