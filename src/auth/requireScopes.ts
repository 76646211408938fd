import { TgsError } from '../errors.js';
import { expressionSatisfied, formatExpression, unsatisfiedPart, type ScopeExpression } from './scopes.js';

/**
 * Throws when `have` does not satisfy `expr`, naming its smallest unsatisfied part (and `required` in the details):
 * 401 AuthenticationFailed for a caller without credentials (`clientId` undefined), 403 InsufficientScopes for a
 * client. The one scope refusal of tgs: the HTTP API's checks and the Temporal-native graph start use it.
 */
export function requireScopes(clientId: string | undefined, have: readonly string[], expr: ScopeExpression): void {
  if (expressionSatisfied(have, expr)) return;
  const missing = unsatisfiedPart(have, expr) ?? expr;
  throw new TgsError(
    clientId === undefined ? 'AuthenticationFailed' : 'InsufficientScopes',
    clientId === undefined
      ? `This request needs credentials with scopes: ${formatExpression(missing)}`
      : `Client ${clientId} lacks scopes: ${formatExpression(missing)}`,
    { required: missing },
  );
}
