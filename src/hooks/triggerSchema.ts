import { Ajv, type ValidateFunction } from 'ajv';
import addFormatsModule from 'ajv-formats';
import { TgsError } from '../errors.js';

// ajv-formats is CommonJS; its default export arrives wrapped under NodeNext resolution.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as (ajv: Ajv) => Ajv;

/**
 * A hook's `triggerSchema`: the JSON schema a trigger's payload must match (Taskcluster). A caller's schema, so it
 * is compiled by an Ajv of its own (never the API's, whose schemas it could otherwise name by `$id`), without
 * loading anything remote: a `$ref` it cannot resolve is refused when the hook is written, not when it fires.
 */
const ajv = addFormats(new Ajv({ allErrors: true, strict: false, validateFormats: true, addUsedSchema: false }));

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
  const validate = compile(schema);
  if (!validate(payload)) {
    throw new TgsError('InputError', `The payload does not match the hook's triggerSchema: ${ajv.errorsText(validate.errors, { separator: '; ' })}`);
  }
}
