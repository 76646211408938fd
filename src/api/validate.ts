import { Ajv, type ErrorObject, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { TgsError } from '../errors.js';
import type { JsonSchema } from './endpoint.js';

// ajv-formats is CommonJS; its default export arrives wrapped under NodeNext resolution.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv) => Ajv;

/**
 * One ajv for all schemas. Unlike fastify's defaults, it never strips unknown properties nor
 * coerces types: a request with either is rejected. Defaults are filled in.
 */
export const ajv = new Ajv({ allErrors: true, useDefaults: true, coerceTypes: false, removeAdditional: false, strict: false });
addFormats(ajv);

const cache = new WeakMap<JsonSchema, ValidateFunction>();

export function compile(schema: JsonSchema): ValidateFunction {
  let validate = cache.get(schema);
  if (!validate) {
    validate = ajv.compile(schema);
    cache.set(schema, validate);
  }
  return validate;
}

export function describeErrors(errors: ErrorObject[] | null | undefined, root = 'body'): string {
  return (errors ?? [])
    .map((e) => {
      const where = `${root}${e.instancePath.replace(/\//g, '.')}`;
      if (e.keyword === 'additionalProperties') return `${where} has unknown property ${JSON.stringify(e.params.additionalProperty)}`;
      if (e.keyword === 'enum') return `${where} must be one of ${JSON.stringify(e.params.allowedValues)}`;
      return `${where} ${e.message}`;
    })
    .join('\n');
}

/**
 * Nesting allowed in a JSON input. Measured here: structuredClone (task definitions are cloned) overflowed the
 * stack at 2,000 levels and JSON.stringify (pg's write of a jsonb) at 5,000, both a 500; 128 is far beyond
 * any real payload.
 */
export const MAX_JSON_DEPTH = 128;

const LONE_SURROGATE = /[\ud800-\udbff](?![\udc00-\udfff])|(?<![\ud800-\udbff])[\udc00-\udfff]/;
// Node 20 has String.prototype.isWellFormed (ES2024, not in this project's lib): a native scan instead of a regex.
const isWellFormed = (String.prototype as { isWellFormed?: (this: string) => boolean }).isWellFormed;

/** Why Postgres would refuse a string (jsonb and text both reject NUL; jsonb rejects a lone surrogate). */
export function unstorableString(text: string): string | undefined {
  if (text.includes('\u0000')) return 'contains NUL (\\u0000)';
  if (isWellFormed ? !isWellFormed.call(text) : LONE_SURROGATE.test(text)) return 'is not well-formed Unicode (a lone surrogate)';
  return undefined;
}

/**
 * Whether every string and key is storable and nothing is nested past MAX_JSON_DEPTH. No paths are built:
 * with them, checking a 100,000-task graph (34 MB of JSON) took 7 s, more than JSON.stringify + JSON.parse of
 * it (5 s), on this machine under load; without them 0.6–0.9 s.
 */
function storable(value: unknown): boolean {
  const values: unknown[] = [value];
  const depths: number[] = [0];
  while (values.length > 0) {
    const v = values.pop();
    const depth = depths.pop() as number;
    if (typeof v === 'string') {
      if (unstorableString(v)) return false;
    } else if (v !== null && typeof v === 'object') {
      if (depth >= MAX_JSON_DEPTH) return false;
      if (Array.isArray(v)) {
        for (const item of v) {
          values.push(item);
          depths.push(depth + 1);
        }
      } else {
        for (const key of Object.keys(v)) {
          if (unstorableString(key)) return false;
          values.push((v as Record<string, unknown>)[key]);
          depths.push(depth + 1);
        }
      }
    }
  }
  return true;
}

/**
 * Bodies already found storable: a graph is validated by the framework and again by createTaskGraph (which
 * the Temporal-native path calls directly); the second walk of a 100,000-task graph would cost as much again.
 * Validation only adds defaults, which are storable.
 */
const checked = new WeakSet<object>();

/**
 * What would make a JSON value crash the stack or Postgres rather than be refused: nesting deeper than
 * MAX_JSON_DEPTH, strings or keys Postgres cannot store. Iterative, so any depth is safe to inspect; the
 * paths of the problems are worked out only when there are some.
 */
export function jsonProblems(value: unknown, root = 'body'): string[] {
  if (value !== null && typeof value === 'object' && checked.has(value)) return [];
  if (storable(value)) {
    if (value !== null && typeof value === 'object') checked.add(value);
    return [];
  }
  const problems: string[] = [];
  const stack: [unknown, string, number][] = [[value, root, 0]];
  while (stack.length > 0 && problems.length < 10) {
    const [v, where, depth] = stack.pop() as [unknown, string, number];
    if (typeof v === 'string') {
      const why = unstorableString(v);
      if (why) problems.push(`${where} ${why}`);
    } else if (v !== null && typeof v === 'object') {
      if (depth >= MAX_JSON_DEPTH) {
        problems.push(`${where} is nested more than ${MAX_JSON_DEPTH} levels deep`);
        continue;
      }
      if (Array.isArray(v)) {
        v.forEach((item, i) => stack.push([item, `${where}[${i}]`, depth + 1]));
      } else {
        for (const [key, item] of Object.entries(v)) {
          const why = unstorableString(key);
          if (why) problems.push(`${where} has a key that ${why}`);
          stack.push([item, `${where}.${key.length > 100 ? `${key.slice(0, 100)}…` : key}`, depth + 1]);
        }
      }
    }
  }
  return problems;
}

/**
 * Checks what this service built itself (a message it publishes) against its schema, filling defaults. A mismatch
 * is a bug here, not a client's mistake, so it throws a plain Error (a 500 where it reaches a request). No
 * storability walk: everything in such a value came from input that passed validateInput or from stored rows;
 * the walk was 5 % of the relay's CPU over a 10,000-task graph, and a task message costs 1.3 µs to build without
 * it, 3.1 with it (docs/bench-journal/2026-11-27.md).
 */
export function assertMatches<T>(schema: JsonSchema, value: unknown, what: string): T {
  const validate = compile(schema);
  if (!validate(value)) throw new Error(`${what} does not match its schema:\n${describeErrors(validate.errors, what)}`);
  return value as T;
}

/** Validates in place (filling defaults) or throws 400 InputValidationError listing every problem. */
export function validateInput<T>(schema: JsonSchema, value: unknown, root = 'body'): T {
  const problems = jsonProblems(value, root);
  if (problems.length > 0) throw new TgsError('InputValidationError', `Input cannot be stored:\n${problems.join('\n')}`);
  const validate = compile(schema);
  if (!validate(value)) {
    throw new TgsError('InputValidationError', `Input does not match the schema:\n${describeErrors(validate.errors, root)}`);
  }
  return value as T;
}
