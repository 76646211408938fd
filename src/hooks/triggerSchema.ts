import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { RE2JS } from 're2js';
import { TgsError } from '../errors.js';

// ajv-formats is CommonJS; its default export arrives wrapped under NodeNext resolution.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv) => Ajv;

/**
 * A hook's `triggerSchema`: the JSON schema a trigger's payload must match (Taskcluster). A caller's schema, so it
 * is compiled by an Ajv of its own (never the API's, whose schemas it could otherwise name by `$id`), without
 * loading anything remote: a `$ref` it cannot resolve is refused when the hook is written, not when it fires.
 */
const ajv = addFormats(new Ajv({ allErrors: true, strict: false, validateFormats: true, addUsedSchema: false, code: { regExp: linearRegExp() } }));

/**
 * `pattern` and `patternProperties` compiled by re2js (RE2's linear-time engine in JavaScript) instead of JavaScript's
 * backtracking one: a hook author's pattern runs on the API's and the bridge's main thread for anonymous trigger
 * payloads and for messages, and `^(a+)+$` against 29 `a`s and a `!` took 23 s there, stalling every other request
 * (security review 2026-11-28, finding 4). re2js matches that in 2 ms and a 60,000-character string in 35 ms (here, 2
 * cores), linear in the input, which is at most 64 KiB. It has no backreferences or lookaround: a schema using them is
 * refused when the hook is written. Chosen over re2 (a native addon to build) and re2-wasm (a WebAssembly module and
 * its memory per process) as plain JavaScript with no install step.
 */
function linearRegExp() {
  const engine = (pattern: string) => RE2JS.compile(pattern);
  // Ajv's standalone code generation would name the engine by this; tgs never generates standalone code
  return Object.assign(engine, { code: 'require("re2js").RE2JS.compile' });
}

/** Compiled schemas by their JSON: hooks are few and their schemas fired again and again. */
const compiled = new Map<string, ValidateFunction>();
const MAX_COMPILED = 1000;

function compile(schema: Record<string, unknown>): ValidateFunction {
  const key = JSON.stringify(schema);
  let validate = compiled.get(key);
  if (!validate) {
    validate = ajv.compile(schema);
    if (compiled.size >= MAX_COMPILED) compiled.clear();
    compiled.set(key, validate);
  }
  return validate;
}

/** Refuses (400) a triggerSchema that is no valid JSON schema, naming what is wrong. */
export function checkTriggerSchema(schema: Record<string, unknown>): void {
  try {
    if (!ajv.validateSchema(schema)) throw new Error(ajv.errorsText(ajv.errors, { separator: '; ' }));
    compile(schema);
  } catch (err) {
    throw new TgsError('InputError', `triggerSchema is not a valid JSON schema: ${(err as Error).message}`);
  }
}

/** Refuses (400) a trigger payload the hook's triggerSchema does not accept. */
export function checkTriggerPayload(schema: Record<string, unknown>, payload: unknown): void {
  let validate: ValidateFunction;
  try {
    validate = compile(schema);
  } catch (err) {
    // a hook written before patterns were compiled by RE2, with a pattern it refuses (a lookahead, a backreference)
    throw new TgsError('InputError', `The hook's triggerSchema no longer compiles (${(err as Error).message}): update the hook with a pattern RE2 accepts (no lookaround or backreferences)`);
  }
  if (!validate(payload)) {
    throw new TgsError('InputError', `The payload does not match the hook's triggerSchema: ${ajv.errorsText(validate.errors, { separator: '; ' })}`);
  }
}
