/**
 * Scopes and scope expressions, as Taskcluster has them. A scope is satisfied by an identical scope
 * or by a scope ending in `*` that is a prefix of it.
 */
export type ScopeExpression =
  | string
  | { AllOf: ScopeExpression[] }
  | { AnyOf: ScopeExpression[] }
  /** Expands to one expression per element of the array parameter `in`, with `<for>` replaced. */
  | { for: string; in: string; each: string };

export function scopeSatisfied(have: readonly string[], required: string): boolean {
  for (const scope of have) {
    if (scope === required) return true;
    if (scope.endsWith('*') && required.startsWith(scope.slice(0, -1))) return true;
  }
  return false;
}

export function expressionSatisfied(have: readonly string[], expr: ScopeExpression): boolean {
  if (typeof expr === 'string') return scopeSatisfied(have, expr);
  if ('AllOf' in expr) return expr.AllOf.every((e) => expressionSatisfied(have, e));
  if ('AnyOf' in expr) return expr.AnyOf.some((e) => expressionSatisfied(have, e));
  throw new Error('scope expression must be rendered before it is checked');
}

/** Parameters an expression template mentions, e.g. `<taskId>` and `for ... in` arrays. */
export function templateParameters(expr: ScopeExpression, into = new Set<string>()): Set<string> {
  if (typeof expr === 'string') {
    for (const m of expr.matchAll(/<([a-zA-Z]+)>/g)) into.add(m[1]);
  } else if ('AllOf' in expr) {
    expr.AllOf.forEach((e) => templateParameters(e, into));
  } else if ('AnyOf' in expr) {
    expr.AnyOf.forEach((e) => templateParameters(e, into));
  } else {
    into.add(expr.in);
    for (const m of expr.each.matchAll(/<([a-zA-Z]+)>/g)) if (m[1] !== expr.for) into.add(m[1]);
  }
  return into;
}

/** Fills `<param>` placeholders; a missing parameter is a programming error. */
export function renderExpression(expr: ScopeExpression, params: Record<string, unknown>): ScopeExpression {
  const fill = (template: string, local: Record<string, unknown>) =>
    template.replace(/<([a-zA-Z]+)>/g, (_, name: string) => {
      const value = local[name];
      if (typeof value !== 'string' && typeof value !== 'number') {
        throw new Error(`scope expression parameter <${name}> is missing`);
      }
      return String(value);
    });
  if (typeof expr === 'string') return fill(expr, params);
  if ('AllOf' in expr) return { AllOf: expr.AllOf.map((e) => renderExpression(e, params)) };
  if ('AnyOf' in expr) return { AnyOf: expr.AnyOf.map((e) => renderExpression(e, params)) };
  const values = params[expr.in];
  if (!Array.isArray(values)) throw new Error(`scope expression parameter <${expr.in}> must be an array`);
  return { AllOf: values.map((v) => fill(expr.each, { ...params, [expr.for]: v })) };
}

/** The smallest part of an expression that is not satisfied, for the 403 message. */
export function unsatisfiedPart(have: readonly string[], expr: ScopeExpression): ScopeExpression | undefined {
  if (expressionSatisfied(have, expr)) return undefined;
  if (typeof expr === 'string') return expr;
  if ('AllOf' in expr) {
    const missing = expr.AllOf.map((e) => unsatisfiedPart(have, e)).filter((e) => e !== undefined);
    return missing.length === 1 ? missing[0] : { AllOf: missing as ScopeExpression[] };
  }
  return expr;
}

export function formatExpression(expr: ScopeExpression): string {
  if (typeof expr === 'string') return expr;
  if ('AllOf' in expr) return `all of (${expr.AllOf.map(formatExpression).join(', ')})`;
  if ('AnyOf' in expr) return `any of (${expr.AnyOf.map(formatExpression).join(', ')})`;
  return `each ${expr.each} for ${expr.for} in ${expr.in}`;
}

/** A valid scope: printable ASCII, no more than one trailing `*` (seed 001). */
export function isValidScope(scope: string): boolean {
  return /^[\x20-\x7e]*$/.test(scope) && !/\*\*$/.test(scope);
}
