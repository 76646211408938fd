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

/** A valid scope: printable ASCII, no more than one trailing `*` (Taskcluster's rule). */
export function isValidScope(scope: string): boolean {
  return /^[\x20-\x7e]*$/.test(scope) && !/\*\*$/.test(scope);
}

/**
 * The part of a template that mentions only `known` parameters (the route's), checkable before the body is
 * read: the conjuncts of an AllOf that need no body field, or the whole expression. undefined when none.
 */
export function knownPart(expr: ScopeExpression, known: ReadonlySet<string>): ScopeExpression | undefined {
  if (typeof expr === 'string' || 'AnyOf' in expr) {
    return [...templateParameters(expr)].every((p) => known.has(p)) ? expr : undefined;
  }
  if ('AllOf' in expr) {
    const parts = expr.AllOf.map((e) => knownPart(e, known)).filter((e) => e !== undefined);
    return parts.length > 0 ? { AllOf: parts } : undefined;
  }
  return undefined;
}

/**
 * The part of a template `have` cannot satisfy for any parameters (a `<param>` may be any text), or undefined
 * when some parameters might satisfy it: an anonymous caller holds what the `anonymous` role grants, so
 * whether it is refused before the body depends on that role. A `for ... in` array may be empty, so anyone
 * may satisfy it. Errs towards undefined: a caller let through meets the handler's full check. The part is
 * made of templates only (no `for ... in`), so it can be checked, and named in the 403, unrendered.
 */
export function unsatisfiablePart(have: readonly string[], expr: ScopeExpression): ScopeExpression | undefined {
  if (typeof expr === 'string') return have.some((scope) => templateCanMatch(scope, expr)) ? undefined : expr;
  if ('AllOf' in expr) {
    const parts = expr.AllOf.map((e) => unsatisfiablePart(have, e)).filter((e) => e !== undefined);
    if (parts.length === 0) return undefined;
    return parts.length === 1 ? parts[0] : { AllOf: parts };
  }
  if ('AnyOf' in expr) {
    const parts = expr.AnyOf.map((e) => unsatisfiablePart(have, e));
    return parts.some((e) => e === undefined) ? undefined : { AnyOf: parts as ScopeExpression[] };
  }
  return undefined;
}

/** Whether `scope` satisfies some rendering of `template`. */
function templateCanMatch(scope: string, template: string): boolean {
  const open = template.indexOf('<');
  if (scope.endsWith('*')) {
    const prefix = scope.slice(0, -1);
    if (open < 0) return template.startsWith(prefix);
    // past the first parameter a rendering can continue with any text
    const literal = template.slice(0, open);
    return literal.startsWith(prefix) || prefix.startsWith(literal);
  }
  if (open < 0) return scope === template;
  const pattern = template
    .split(/<[a-zA-Z]+>/)
    .map((part) => part.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'))
    .join('.*');
  return new RegExp(`^${pattern}$`, 's').test(scope);
}
