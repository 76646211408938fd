/**
 * Roles and scope expansion, as Taskcluster has them (pure: no I/O).
 *
 * A role `R` is held through the scope `assume:R` and grants its scopes. A roleId ending in `*` is a prefix
 * role: `assume:<prefix><rest>` assumes it, and each of its scopes' `<..>` is replaced with `<rest>` (when
 * `<rest>` ends in `*`, everything after `<..>` is dropped, so the result stays a prefix scope). A scope ending
 * in `*` that is a prefix of `assume:R` (`assume:project:*`, `assume*`, `*`) assumes R too; prefix roles it
 * reaches that way get `*` as their parameter. Expansion repeats until nothing new is granted; roles whose
 * scopes would assume each other (a dependency cycle) are refused when written, so it always ends.
 */
import { scopeSatisfied } from './scopes.js';

export interface Role {
  roleId: string;
  scopes: string[];
}

export class RoleError extends Error {
  constructor(
    readonly kind: 'InvalidScope' | 'DependencyCycle',
    message: string,
    readonly details: Record<string, unknown>,
  ) {
    super(message);
  }
}

const PARAM = '<..>';
/** Scopes that can assume a role: `assume:...`, or a `*` scope that is a prefix of `assume:`. */
const ASSUME_PREFIX = /^(?:(?:|a|as|ass|assu|assum|assume)\*$|assume:)/;

const canAssume = (scope: string) => ASSUME_PREFIX.test(scope);
/** What follows `assume:` in a scope that can assume roles (`*` for `assume*`, `*`, ...). */
const assumeInput = (scope: string) => (scope.startsWith('assume:') ? scope.slice('assume:'.length) : '*');

/** The prefixes of a set's `*` scopes: each without its `*`. */
const starPrefixesOf = (scopes: readonly string[]) => scopes.filter((s) => s.endsWith('*')).map((s) => s.slice(0, -1));

/**
 * Whether a scope is covered by one of the `*` scopes with these prefixes: `<p>*` covers what starts with p, but not
 * itself. With many star scopes, each scope's prefixes are looked up in a set of the star prefixes (linear in the
 * total length) instead of comparing with every star scope (quadratic: 10,000 star scopes in one expandScopes body
 * would cost 10^8 comparisons).
 */
function coveredByStars(prefixes: readonly string[]): (scope: string) => boolean {
  // the usual case, a few star scopes: compare with each
  if (prefixes.length <= 16) return (s) => prefixes.some((p) => s.startsWith(p) && s !== `${p}*`);
  const starPrefixes = new Set(prefixes);
  return (s) => {
    // a star scope covers itself only through a shorter prefix
    const longest = s.endsWith('*') ? s.length - 1 : s.length;
    for (let i = 0; i <= longest; i++) {
      if (starPrefixes.has(s.slice(0, i)) && !(i === s.length - 1 && s.endsWith('*'))) return true;
    }
    return false;
  };
}

/** Uniq, drop scopes a `*` scope of the set already covers, sort. */
export function normalizeScopes(scopes: Iterable<string>): string[] {
  const unique = [...new Set(scopes)];
  const covered = coveredByStars(starPrefixesOf(unique));
  return unique.filter((s) => !covered(s)).sort();
}

/**
 * normalizeScopes of the union of two normalized sets, in time linear in their sizes: each keeps what the other's `*`
 * scopes do not cover (its own cover nothing more of it), and the two sorted lists are merged. A run's certificate (3
 * scopes) with what the anonymous role grants (12) is expanded on every report a worker makes: the whole expansion took
 * 10.3-12.8 µs of an idle core normalizing their union again, 6.0-7.2 with this (docs/bench-journal/2026-11-28.md
 * § Late morning of 2026-11-28).
 */
export function mergeNormalized(a: readonly string[], b: readonly string[]): string[] {
  const starsA = starPrefixesOf(a);
  const starsB = starPrefixesOf(b);
  const coveredByB = coveredByStars(starsB);
  const coveredByA = coveredByStars(starsA);
  const keptA = starsB.length === 0 ? a : a.filter((s) => !coveredByB(s));
  const keptB = starsA.length === 0 ? b : b.filter((s) => !coveredByA(s));
  const merged: string[] = [];
  let i = 0;
  let j = 0;
  while (i < keptA.length && j < keptB.length) {
    if (keptA[i] < keptB[j]) merged.push(keptA[i++]);
    else if (keptB[j] < keptA[i]) merged.push(keptB[j++]);
    else {
      merged.push(keptA[i++]);
      j++;
    }
  }
  while (i < keptA.length) merged.push(keptA[i++]);
  while (j < keptB.length) merged.push(keptB[j++]);
  return merged;
}

function withParam(scopes: readonly string[], param: string): string[] {
  return scopes.map((s) => {
    const at = s.indexOf(PARAM);
    if (at === -1) return s;
    return param.endsWith('*') ? s.slice(0, at) + param : s.slice(0, at) + param + s.slice(at + PARAM.length);
  });
}

/** The scopes role grants to `assume:<input>` (undefined when it does not match). */
function granted(role: Role, input: string): string[] | undefined {
  const kleene = input.endsWith('*') ? input.slice(0, -1) : undefined;
  if (!role.roleId.endsWith('*')) {
    if (input === role.roleId || (kleene !== undefined && role.roleId.startsWith(kleene))) return role.scopes;
    return undefined;
  }
  const prefix = role.roleId.slice(0, -1);
  if (input.startsWith(prefix)) return withParam(role.scopes, input.slice(prefix.length));
  if (kleene !== undefined && prefix.startsWith(kleene)) return withParam(role.scopes, '*');
  return undefined;
}

/**
 * Refuses what Taskcluster refuses: a prefix role's scope with more than one `<..>` or ending in `*<..>`
 * (ambiguous), and roles that assume each other, directly or through others (a cycle).
 */
export function validateRoles(roles: readonly Role[]): void {
  for (const role of roles) {
    if (!role.roleId.endsWith('*')) continue;
    for (const s of role.scopes) {
      if (s.indexOf(PARAM) !== s.lastIndexOf(PARAM)) {
        throw new RoleError('InvalidScope', `parameterized scope '${s}' of role ${role.roleId} contains multiple '<..>'`, { scope: s });
      }
      if (s.endsWith(`*${PARAM}`)) {
        throw new RoleError('InvalidScope', `parameterized scope '${s}' of role ${role.roleId} ends with '*<..>' which implies an ambiguous kleene`, { scope: s });
      }
    }
  }
  // r depends on d when one of r's scopes assumes d; a `<..>` counts as `*` (it may become anything).
  const dependsOn = (r: Role): Role[] => {
    const inputs = r.scopes
      .map((s) => (r.roleId.endsWith('*') && s.includes(PARAM) ? s.slice(0, s.indexOf(PARAM)) + '*' : s))
      .filter(canAssume)
      .map(assumeInput);
    return roles.filter((d) => inputs.some((i) => granted(d, i) !== undefined));
  };
  const done = new Set<Role>();
  const stack: Role[] = [];
  const visit = (r: Role) => {
    if (done.has(r)) return;
    const at = stack.indexOf(r);
    if (at !== -1) {
      const cycle = [...stack.slice(at), r].map((x) => `assume:${x.roleId}`);
      throw new RoleError('DependencyCycle', `Roles may not contain dependency cycles, found: '${cycle.join("' -> '")}'`, { cycle });
    }
    stack.push(r);
    for (const d of dependsOn(r)) visit(d);
    stack.pop();
    done.add(r);
  };
  for (const r of roles) visit(r);
}

/**
 * An expansion of scope sets over one set of roles, with a cache of the `assume` parts already seen and of the
 * expansions of scope sets that assume something (a client's scopes with `assume:anonymous`, expanded on every
 * request it signs: 0.7 µs from the cache where normalizing them again took 2.1, docs/bench-journal/2026-11-27.md).
 */
export class ScopeExpander {
  private readonly cache = new Map<string, string[]>();
  private readonly expansions = new Map<string, string[]>();

  constructor(private readonly roles: readonly Role[]) {}

  /** Every scope `scopes` hold once all the roles they may assume are assumed, normalized (a new array). */
  expand(scopes: readonly string[]): string[] {
    // JSON, not a join: a key must not be ambiguous whatever characters a scope holds
    const whole = JSON.stringify(scopes);
    const known = this.expansions.get(whole);
    if (known) return known.slice();
    const assumes = normalizeScopes(scopes.filter(canAssume));
    // A set that assumes nothing (a run's certificate, usually) is its own expansion: not worth a cache entry.
    if (assumes.length === 0) return normalizeScopes(scopes);
    const key = assumes.join('\n');
    let grantedScopes = this.cache.get(key);
    if (!grantedScopes) {
      grantedScopes = this.compute(assumes);
      // Bounded: keys are the distinct `assume` sets of callers, a handful in practice.
      if (this.cache.size >= 10_000) this.cache.clear();
      this.cache.set(key, grantedScopes);
    }
    const expanded = mergeNormalized(normalizeScopes(scopes), grantedScopes);
    // Bounded likewise: keys are the distinct scope sets of clients (and of certificates that assume roles).
    if (this.expansions.size >= 10_000) this.expansions.clear();
    this.expansions.set(whole, expanded);
    return expanded.slice();
  }

  private compute(assumes: string[]): string[] {
    const have = [...assumes];
    const queue = [...assumes];
    for (let scope = queue.pop(); scope !== undefined; scope = queue.pop()) {
      const input = assumeInput(scope);
      for (const role of this.roles) {
        for (const s of granted(role, input) ?? []) {
          if (scopeSatisfied(have, s)) continue;
          have.push(s);
          if (canAssume(s)) queue.push(s);
        }
      }
    }
    return normalizeScopes(have);
  }
}

/** Every client, authenticated or not, holds the `anonymous` role (Taskcluster). */
export const ANONYMOUS_SCOPE = 'assume:anonymous';
