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

/** Validates in place (filling defaults) or throws 400 InputValidationError listing every problem. */
export function validateInput<T>(schema: JsonSchema, value: unknown, root = 'body'): T {
  const validate = compile(schema);
  if (!validate(value)) {
    throw new TgsError('InputValidationError', `Input does not match the schema:\n${describeErrors(validate.errors, root)}`);
  }
  return value as T;
}
